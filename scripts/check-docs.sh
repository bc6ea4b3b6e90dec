#!/usr/bin/env bash
# Docs that cannot drift from the code. Fails (listing each finding) when
#  1. a doc names a function, macro or error code that the code does not
#     have anywhere in its sources (a rename or a removal leaves no stale
#     name);
#  2. a doc calls something missing, "not supported yet", "not handled
#     yet" or "not implemented yet": such a sentence is true only until the
#     feature lands, so none is allowed; say what the code does instead,
#     and keep plans in the issues, history in CHANGELOG.md;
#  3. a claim that was once true and is false now comes back (the list
#     below: each pattern with the fact that makes it false);
#  4. a reference to a section of docs/DESIGN.md ("section N", "§N") is
#     neither a link to its anchor ("#N-title-words") nor followed by its
#     title ("section N (Title)", "section N, Title"), or names the wrong
#     one: numbers move, titles say which was meant;
#  5. a backticked name does not exist: a file path (`src/lock.c`,
#     `lock.c`), or a snake_case identifier (a test, a function, a CTest
#     name, an option) that no file of the code has;
#  6. a version or a default differs from the code: "Redis X.Y or newer"
#     against the handshake's minimum (src/handshake.c), an option's
#     "default N" against rt_options_init (src/options.c);
#  7. a table the code defines says otherwise: docs/CLI.md's exit codes
#     against cli_exit_for (src/cli/args.c), docs/CONTRIBUTING.md's layers
#     against src/layers.txt (scripts/check-layers.sh --table).
#
#   bash scripts/check-docs.sh
#
# The docs: README.md, docs/*.md (the generated REFERENCE.md included),
# the READMEs of tests/fault/, module/, model/ and bindings/node/, the
# Unreleased section of CHANGELOG.md (5 only: older sections are history),
# and the comments of include/redturn.h and of its parts in
# include/redturn/ (1-4 and 6).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

docs=(README.md docs/*.md tests/fault/README.md module/README.md
  model/README.md include/redturn.h include/redturn/*.h
  bindings/node/index.d.ts)
[ -f bindings/node/README.md ] && docs+=(bindings/node/README.md)
fail=0
finding() {
  echo "check-docs: $*" >&2
  fail=1
}

# ---- 1. names the code must have ------------------------------------------
# Every rt_/RT_ name in the code: the tree's sources and scripts, and the
# error codes that RT_ERRNO_MAP spells as XX(NAME, ...).
code=$(
  {
    git ls-files -- src include tests tools bench examples scripts cmake \
      CMakeLists.txt 2>/dev/null | xargs cat 2>/dev/null |
      grep -oE '\b(rt|RT)_[A-Za-z0-9_]+'
    grep -oE '^ *XX\([A-Z]+' include/redturn.h | sed 's/^ *XX(/RT_/'
  } | sort -u
)
for f in "${docs[@]}"; do
  case $f in include/*) continue ;; esac # the headers are code
  # A name followed by '*' (rt_lock_*) stands for a family: skip it.
  while IFS= read -r name; do
    case "$name" in *'*' | *_) continue ;; esac
    grep -qxF "$name" <<<"$code" && continue
    finding "$f names $name, which the code does not have"
  done < <(grep -oE '\b(rt|RT)_[A-Za-z0-9_]*[A-Za-z0-9_*]' "$f" | sort -u)
done

# ---- 2. "not ... yet" ------------------------------------------------------
while IFS= read -r hit; do
  finding "a feature called missing: $hit"
done < <(grep -nHiE '(not|never) (supported|handled|implemented|built|available) yet|not yet (supported|handled|implemented|built|available)' \
  "${docs[@]}" || true)

# ---- 3. claims that came true and must not come back ------------------------
# pattern<TAB>what is true instead
claims=$(
  cat <<'EOF'
Cluster is not supported	a Redis Cluster works: src/cluster.c, tests/topology/it_cluster.c
Sentinel is not handled	redis-sentinel:// works: src/sentinel.c, tests/topology/it_sentinel.c
rediss:// \(TLS\) is not supported	rediss:// works: src/tls.c, tests/topology/it_tls.c
No automatic lease renewal	rt_lock_auto_renew() renews: tests/api/it_renew.c
poll handle per connection	each connection is a uv_tcp_t stream: src/link.c
on a Redis Cluster it is refused	rt_observe works on a cluster: tests/topology/it_cluster.c
rt_observe` is refused	rt_observe works on a cluster: tests/topology/it_cluster.c
Every operation is one Lua script	a call is the module's command, FCALL or EVALSHA: src/calls.c
before 7\.0\)? (falls back|uses|it uses|, the eval)	a server before 7.0 is refused by the handshake's INFO: src/handshake.c
Redis before 7\.0\)	a server before 7.0 is refused by the handshake's INFO: src/handshake.c
INFO server memory`	the handshake sends INFO server memory cluster: src/handshake.c
SCRIPT LOAD` of every script	the handshake loads the Functions library (SCRIPT LOAD only on the eval path): src/handshake.c
builds two trees	scripts/test.sh builds build/ and build-asan/, the compatibility servers, the Node.js addon and the fuzz tree
bench\.sh.*(about a minute|< ?[0-9]+ min)	the benchmark's duration is said once, in docs/PERFORMANCE.md
71 \| internal error[^|]*\| all	exit 71 is what no other row names: docs/CLI.md lists each code's errors
another count, read-write lock\)	RT_EKIND covers elections too: include/redturn.h
 "rw(lock)?" \(a read-write lock\); NULL	inspect's kind is "semaphore", "rwlock" or "election": src/query.c
(kind|`kind`) is "s:<N>"|"s:<N>" \(semaphore\)|\(`"rw"`	inspect's kind is "semaphore", "rwlock" or "election" (the stored "s:<N>", "rw", "e" are DESIGN.md's): src/query.c
EOF
)
while IFS=$'\t' read -r pattern truth; do
  while IFS= read -r hit; do
    finding "$hit: false ($truth)"
  done < <(grep -nHE "$pattern" "${docs[@]}" || true)
done <<<"$claims"

# ---- 4. references to sections of DESIGN.md ----------------------------------
while IFS= read -r hit; do
  finding "$hit"
done < <(perl -e '
  my ($design, @files) = @ARGV;
  open my $d, "<", $design or die; my (%title, %slug);
  while (<$d>) {
    next unless /^## (\d+)\. (.*?)\s*$/;
    my ($n, $t) = ($1, $2); $title{$n} = $t;
    (my $s = lc "$n. $t") =~ s/[^a-z0-9 -]//g; $s =~ s/ /-/g; $slug{$n} = $s;
  }
  for my $f (@files) {
    open my $in, "<", $f or next; my $i = 0;
    while (my $line = <$in>) {
      $i++; my @links;
      push @links, [$-[0], $+[0], $2] while $line =~ /\[([^\]]*)\]\(([^)\s]*)\)/g;
      while ($line =~ /(?:sections? |§ ?)(\d+)/g) {
        my ($s, $e, $n) = ($-[0], $+[0], $1); my $rest = substr($line, $e); my $ok;
        my ($in) = grep { $s >= $_->[0] && $e <= $_->[1] } @links;
        if ($in) { $ok = defined $slug{$n} && $in->[2] =~ /#\Q$slug{$n}\E$/ }
        elsif ($rest =~ /^ \(([^)]*)/ || $rest =~ /^, ([^.;)]*)/) {
          my $t = $1; $t =~ s/\s+$//; $ok = defined $title{$n} && length($t) >= 4 && index(lc $title{$n}, lc $t) == 0;
        }
        print "$f:$i: \"", substr($line, $s, $e - $s), "\" is not DESIGN.md section $n by its anchor (#",
          $slug{$n} // "no such section", ") or title (", $title{$n} // "none", ")\n" unless $ok;
      }
    }
  }' docs/DESIGN.md "${docs[@]}" src/*.c src/*.h module/*.c module/*.h)

# ---- 5. backticked files and identifiers that exist ------------------------------
# The vocabulary: every tracked file's path and name, every word of the
# code's files (tests, functions, CTest names, options), and what the build
# makes of them (build trees, generated files) by their usual names.
changelog_unreleased=$(mktemp)
trap 'rm -f "$changelog_unreleased"' EXIT
sed -n '/^## Unreleased/,/^## [0-9]/p' CHANGELOG.md >"$changelog_unreleased"
while IFS= read -r hit; do
  finding "$hit"
done < <(git ls-files | perl -e '
  my $unreleased = shift @ARGV; my @docs = @ARGV; my (%path, %word);
  # Names from outside the tree, each where it comes from: libuv, Node-API
  # and sysexits headers, libuv docs, what the build and SPIN generate,
  # Redis INFO fields and server internals, kernel functions in profiles.
  $path{$_} = 1 for qw(uv.h node_api.h sysexits.h docs/src/errors.rst rt_scripts.c
    rt_scripts.h rt_protocol.h pan.c);
  $word{$_} = 1 for qw(usec_per_call data_received pvm_irq_enable finish_task_switch
    sock_def_readable);
  my $code = "";
  my @files = map { chomp; $_ } <STDIN>;
  for my $f (@files) {
    $path{$f} = 1; (my $b = $f) =~ s{.*/}{}; $path{$b} = 1;
    my $p = $f; while ($p =~ s{^[^/]+/}{}) { $path{$p} = 1 }
    my $d = $f; while ($d =~ s{/[^/]*$}{}) { $path{"$d/"} = 1; $path{$d} = 1 }
    (my $stem = $b) =~ s/\.[^.]*$//; $word{$stem} = 1;
    next unless $f =~ m{^(src|include|tests|tools|bench|module|lua|model|bindings|scripts|cmake|examples|CMakeLists\.txt)};
    next if $f =~ m{^tests/docs/}; # the drift put back on purpose
    open my $in, "<", $f or next; local $/; my $t = <$in> // ""; $word{$_} = 1 for $t =~ /[A-Za-z_][A-Za-z0-9_]*/g;
    $code .= $t;
  }
  for my $f (@docs, $unreleased) {
    open my $in, "<", $f or next; my $i = 0; my $shown = $f eq $unreleased ? "CHANGELOG.md (Unreleased)" : $f;
    while (my $line = <$in>) {
      $i++;
      while ($line =~ /`([^`\s]+)`/g) {
        my $t = $1; $t =~ s/[(),:;.]+$//; $t =~ s/\(\)$//;
        my $top = qr{(src|include|tests|tools|bench|module|lua|model|bindings|scripts|cmake|examples|docs|abi)/};
        if ($t =~ m{^[A-Za-z0-9_.\-/]+\.(c|h|sh|lua|pml|js|ts|md|txt|cmake|json|supp|abi)$} || $t =~ m{^$top}) {
          next if $t =~ m{^(build|/|\.\./|~|<)} || $t =~ m{[*<>]};
          if ($t =~ /^(.*)\{([^}]*)\}(.*)$/) { # a{b,c}d: each must exist
            my ($a, $alts, $z) = ($1, $2, $3);
            my @missing = grep { !$path{"$a$_$z"} } split /,/, $alts;
            print "$shown:$i: `$a$_$z` names a file that is not in the tree\n" for @missing;
            next;
          }
          next if $path{$t} || $path{"$t/"} || grep { $path{"$t$_"} } (".c", ".h", ".sh");
          next if index($code, $t) >= 0; # a path the code itself names (a target, a fault point)
          print "$shown:$i: `$t` names a file that is not in the tree\n";
        } elsif ($t =~ /^[a-z][a-z0-9]*(?:_[a-z0-9]+)+$/) {
          next if $word{$t};
          print "$shown:$i: `$t` names nothing the code has (no test, function, CTest or option of that name)\n";
        }
      }
    }
  }' "$changelog_unreleased" "${docs[@]}")

# ---- 6. versions and defaults ------------------------------------------------------
min_redis=$(sed -n 's/.*needs Redis \([0-9][0-9.]*\) or newer.*/\1/p' src/handshake.c | head -n 1)
if [ -z "$min_redis" ]; then
  finding "src/handshake.c: no \"needs Redis X.Y or newer\" to check the docs' version against"
else
  while IFS= read -r hit; do
    version=$(grep -oE '(Redis|redis-server`?) [0-9]+\.[0-9]+ or newer' <<<"${hit#*:*:}" | grep -oE '[0-9]+\.[0-9]+' | head -n 1)
    [ "$version" = "$min_redis" ] || finding "$hit: the handshake takes Redis $min_redis or newer (src/handshake.c)"
  done < <(grep -nHE '(Redis|redis-server`?) [0-9]+\.[0-9]+ or newer' "${docs[@]}" || true)
fi
# rt_options_init's "d.<field> = <number>;": each doc line naming the field
# and "default N[ ms| s]" must say the same.
while IFS='=' read -r field value; do
  while IFS= read -r hit; do
    said=$(grep -oE "default(:| is)? [0-9]+( ?ms| s\\b)?" <<<"${hit#*:*:}" | head -n 1) || true
    [ -n "$said" ] || continue
    n=$(grep -oE '[0-9]+' <<<"$said")
    case $said in *' s') n=$((n * 1000)) ;; esac
    [ "$n" = "$value" ] || finding "$hit: $field defaults to $value (src/options.c)"
  done < <(grep -nHwE "$field" "${docs[@]}" | grep -E "default(:| is)? [0-9]" || true)
done < <(sed -n 's/^ *d\.\([a-z_]*\) = \([0-9][0-9]*\);.*/\1=\2/p' src/options.c)

# ---- 7. the exit codes of the redturn command -----------------------------------
# cli_exit_for's "case RT_X: ... return CLI_Y;" and cli.h's "CLI_Y = N":
# the row of N in docs/CLI.md's exit table lists exactly those RT_X.
while IFS= read -r hit; do
  finding "$hit"
done < <(perl -e '
  # Codes no case names fall to the default: here the ones CLI.md lists.
  my (%num, %want); my @rest = qw(RT_ENOMEM);
  open my $h, "<", "src/cli/cli.h" or die; while (<$h>) { $num{$1} = $2 if /\b(CLI_[A-Z_]+) = (\d+)/ } close $h;
  open my $a, "<", "src/cli/args.c" or die; my $in = 0; my @pending;
  while (<$a>) {
    $in = 1 if /^int cli_exit_for\(/; next unless $in; last if /^}/;
    push @pending, $1 if /case (RT_E[A-Z]+):/;
    push @pending, @rest if /default:/;
    if (/return (CLI_[A-Z_]+);/) { $want{$num{$1}}{$_} = 1 for @pending; @pending = () }
  }
  close $a;
  open my $c, "<", "docs/CLI.md" or die; my %row;
  while (<$c>) { next unless /^\| (\d+) \|/; my $n = $1; my @cells = split /\s*\|\s*/; $row{$n}{$_} = 1 for ($cells[3] // "") =~ /`(RT_E[A-Z]+)`/g; $row{$n}{" seen"} = 1 }
  for my $n (sort keys %want) {
    print "docs/CLI.md: no row for exit $n\n" unless $row{$n}{" seen"};
    for my $e (sort keys %{$want{$n}}) { print "docs/CLI.md: exit $n is also $e (src/cli/args.c)\n" unless $row{$n}{$e} }
  }
  for my $n (sort keys %row) { for my $e (sort grep { /^RT_/ } keys %{$row{$n}}) { print "docs/CLI.md: exit $n lists $e, which src/cli/args.c maps elsewhere\n" unless $want{$n}{$e} } }
')

# The layers' table is made from src/layers.txt.
if ! diff <(bash scripts/check-layers.sh --table) \
  <(sed -n '/^<!-- made from src\/layers.txt/,/^<!-- end of the table made from src\/layers.txt/p' \
    docs/CONTRIBUTING.md | sed '1d;$d') >/dev/null; then
  finding "docs/CONTRIBUTING.md: the layers' table differs from src/layers.txt (bash scripts/check-layers.sh --table makes it)"
fi

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "check-docs: ${#docs[@]} documents agree with the code"
