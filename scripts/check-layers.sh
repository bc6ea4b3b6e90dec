#!/usr/bin/env bash
# Check the layers of src/ (declared in src/layers.txt), or of another
# directory with its own layers.txt (bindings/node/src), against the code:
#   - the include graph: every #include "x" among the files of src/ (and
#     the generated rt_scripts.h and rt_protocol.h);
#   - the call graph between the library's object files: a symbol that one
#     object of the static library leaves undefined and another defines is
#     a call (or a use of data) from the first file to the second.
# Fails, naming each, on a cycle in either graph, on an include or a call
# to a file of a later layer, and on a file that src/layers.txt does not
# list.
#
#   bash scripts/check-layers.sh <libredturn.a> [<src dir>]
#   bash scripts/check-layers.sh --table [<src dir>]   # the layers as a
#                                 # markdown table (docs/CONTRIBUTING.md)
#
# NM names the nm to use (default: nm).
# The ctest "layers" runs it on the build's static library.
set -euo pipefail

if [ "${1:-}" = --table ]; then
  src=${2:-$(cd "$(dirname "$0")/../src" && pwd)}
  awk '
    /^[ \t]*(#|$)/ { next }
    /^[^ \t]/ { name = $0; sub(/:.*/, "", name); what = $0; sub(/^[^:]*: */, "", what)
                first = 1; next }
    {
      line = $0; sub(/^[ \t]+/, "", line)
      file = line; sub(/[ \t].*/, "", file)
      rest = line; sub(/^[^ \t]+[ \t]+/, "", rest)
      to = "-"
      if (index(rest, " -> ")) { to = substr(rest, index(rest, " -> ") + 4); rest = substr(rest, 1, index(rest, " -> ") - 1) }
      if (!header++) { print "| layer | file | what it is | its completions go to |"; print "|-------|------|------------|-----------------------|" }
      printf "| %s | `%s` | %s | %s |\n", first ? "**" name "**: " what : "", file, rest, to
      first = 0
    }' "$src/layers.txt"
  exit 0
fi

lib=${1:?usage: check-layers.sh <libredturn.a> [<src dir>]}
src=${2:-$(cd "$(dirname "$0")/../src" && pwd)}
layers=$src/layers.txt

# "from to" lines: the include graph, then the call graph.
includes() {
  local f
  for f in "$src"/*.c "$src"/*.h; do
    [ -e "$f" ] || continue
    sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
      while read -r inc; do
        case $inc in
        */*) ;;                      # not a file of src/
        redturn.h) ;;                # the public header
        *) echo "${f##*/} $inc" ;;
        esac
      done
  done
}

calls() {
  "${NM:-nm}" -A -P "$lib" | awk '
    # "lib.a[obj.c.o]: symbol TYPE ...": global definitions and undefined.
    {
      obj = $1; sub(/^.*\[/, "", obj); sub(/\]:$/, "", obj)
      sub(/\.o$/, "", obj); sub(/\.obj$/, "", obj)
      if ($3 == "U") { use[obj, $2] = 1; users[$2] = users[$2] " " obj }
      else if ($3 ~ /^[TDBRCGSV]$/) def[$2] = obj
    }
    END {
      for (sym in users) {
        if (!(sym in def)) continue
        n = split(users[sym], u, " ")
        for (i = 1; i <= n; i++)
          if (u[i] != def[sym] && !seen[u[i], def[sym]]++)
            print u[i], def[sym], sym
      }
    }' | sort
}

# Check a graph of "from to [what]" lines: layer order, then cycles.
check() {
  local kind=$1 edges=$2
  awk -v kind="$kind" -v layers="$layers" '
    BEGIN {
      # "<layer>: ..." starts a layer; an indented line names a file of it.
      while ((getline line < layers) > 0) {
        if (line ~ /^[ \t]*(#|$)/) continue
        if (line ~ /^[^ \t]/) {
          name = line; sub(/:.*/, "", name)
          lname[++nlayers] = name
          continue
        }
        f = line; sub(/^[ \t]+/, "", f); sub(/[ \t].*/, "", f)
        layer[f] = nlayers
      }
      bad = 0
    }
    {
      from = $1; to = $2; what = NF > 2 ? " (" $3 ")" : ""
      for (k = 1; k <= 2; k++) {
        f = k == 1 ? from : to
        if (!(f in layer) && !(f in unlisted)) {
          unlisted[f] = 1
          printf "%s: %s is not in %s\n", kind, f, layers; bad = 1
        }
      }
      if ((from in layer) && (to in layer) && layer[to] > layer[from]) {
        printf "%s: %s (%s) -> %s (%s)%s goes up a layer\n", kind, from,
               lname[layer[from]], to, lname[layer[to]], what
        bad = 1
      }
      if (!((from, to) in adj)) { adj[from, to] = 1; out[from] = out[from] " " to }
      nodes[from] = 1; nodes[to] = 1
    }
    # Depth-first search; a grey node met again closes a cycle.
    function visit(v,    n, i, w, nb, j, path) {
      color[v] = 1; stack[++depth] = v
      n = split(out[v], nb, " ")
      for (i = 1; i <= n; i++) {
        w = nb[i]
        if (color[w] == 1) {
          path = w
          for (j = depth; j >= 1 && stack[j] != w; j--) ;
          for (j = j + 1; j <= depth; j++) path = path " -> " stack[j]
          printf "%s: cycle %s -> %s\n", kind, path, w
          bad = 1
        } else if (color[w] == 0) {
          visit(w)
        }
      }
      depth--; color[v] = 2
    }
    END {
      for (v in nodes) if (color[v] == 0) visit(v)
      exit bad
    }' <<<"$edges"
}

status=0
check include "$(includes)" || status=1
check call "$(calls)" || status=1
if [ "$status" -eq 0 ]; then
  echo "layers: no cycle, no upward include or call ($(grep -c '^[^#[:space:]]' "$layers") layers)"
fi
exit "$status"
