#!/usr/bin/env bash
# The compatibility matrix: every integration test (ctest label
# integration: TLS, Sentinel and Cluster included) against each server
# redturn's users run, without and with the module, and a table of the
# outcome (README.md, "Servers").
#
#   bash scripts/compat.sh [--servers "a b"] [-R regex] [--jobs N]
#
# Servers: Debian's (or PATH's) redis-server, in the default pass and the
# module pass of the tree, and each server of ../shared/servers (built once
# and cached by scripts/servers.sh: redis-7.2.6, redis-7.4.1, valkey-7.2.7,
# valkey-8.0.1), in the passes <server> and <server>+module
# (cmake/TestPasses.cmake). One build tree, build-compat/, one ctest with
# all of them side by side (resource "load", 8 slots per core).
#
# A cell of the table says "pass" when each of its tests passed, else
# "FAIL n/m" (n of its m tests failed; their names are listed below the
# table), "-" when none ran. The columns, by test name:
#
#   eval       it_scripts, it_scripts_pool, it_paths: they load and run
#              the scripts themselves (EVALSHA and FCALL) and choose the
#              paths themselves (plain pass)
#   Functions  every other integration test but those of TLS, Sentinel,
#              Cluster and it_module, the client on its default path, the
#              Functions library (plain pass)
#   module     the same tests with the server loading the build's module
#              and every client forced to it (+module pass), and it_module
#   TLS        it_tls*, both passes
#   Sentinel   it_sentinel*, both passes
#   Cluster    it_cluster*, it_topology, both passes
#
# Without ../shared/servers (a user's clone), only PATH's redis-server
# runs: the script says what it skipped and why, and its exit status is
# that of what ran (0 when each test passed). The log is in
# build-compat/compat.log, the table in build-compat/compat.md.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here" || exit 1
tree=${REDTURN_COMPAT_TREE:-build-compat}
names=(redis-7.2.6 redis-7.4.1 valkey-7.2.7 valkey-8.0.1)
regex=
jobs=$(($(nproc) * 8))
while [ $# -gt 0 ]; do
  case $1 in
  --servers) read -r -a names <<<"$2"; shift 2 ;;
  -R) regex=$2; shift 2 ;;
  --jobs) jobs=$2; shift 2 ;;
  -h | --help) sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "compat.sh: unknown argument $1" >&2; exit 64 ;;
  esac
done

base=$(command -v redis-server || true)
if [ -z "$base" ]; then
  echo "compat.sh: no redis-server in PATH" >&2
  exit 69
fi
base_version=$(redis-server --version | sed -n 's/.*v=\([0-9.]*\).*/\1/p')
base_name="redis-$base_version (PATH)"

# Build the servers (once, cached), niced: the machine is shared.
list=
ran=()
skipped=()
skip_log=$(mktemp)
trap 'rm -f "$skip_log"' EXIT
for name in "${names[@]}"; do
  if bin=$(nice -n 10 bash scripts/servers.sh build "$name" 2>"$skip_log"); then
    list+="${list:+;}$name=$bin"
    ran+=("$name")
  else
    skipped+=("$name: $(tail -1 "$skip_log")")
  fi
done

cmake -S . -B "$tree" -DBUILD_TESTING=ON -DREDTURN_WERROR=ON \
  "-DREDTURN_COMPAT_SERVERS=$list" >/dev/null || exit 1
nice -n 10 cmake --build "$tree" -j"$(nproc)" >"$tree/build.log" 2>&1 || {
  tail -40 "$tree/build.log"
  echo "compat.sh: the build failed" >&2
  exit 1
}
rm -f "$tree/build.log"

printf '{"version":{"major":1,"minor":0},"local":[{"load":[{"id":"0","slots":%d}]}]}\n' \
  "$jobs" >"$tree/resources.json"
args=(--output-on-failure -j"$jobs" --resource-spec-file resources.json
  -L integration -LE 'eval|asan')
[ -n "$regex" ] && args+=(-R "$regex")
(cd "$tree" && env -u REDTURN_TEST_URL -u REDTURN_TEST_PORT \
  -u REDTURN_TEST_SCRIPT_PATH -u REDTURN_TEST_MODULE \
  ctest "${args[@]}") >"$tree/compat.log" 2>&1
rc=$?

# One line per test: "<name> <passed|failed>", from ctest's summary lines.
sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*  Passed .*/\1 passed/p
        s/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*\*\*\*.*/\1 failed/p
        s/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) .*Exception.*/\1 failed/p' \
  "$tree/compat.log" >"$tree/compat.results"

# column TEST MODULE_PASS: the table's column of a test.
column() {
  case $1 in
  it_tls*) echo TLS ;;
  it_sentinel*) echo Sentinel ;;
  it_cluster* | it_topology) echo Cluster ;;
  it_module) echo module ;;
  it_scripts | it_scripts_pool | it_paths) [ "$2" = 1 ] && echo module || echo eval ;;
  *) [ "$2" = 1 ] && echo module || echo Functions ;;
  esac
}

cols=(eval Functions module TLS Sentinel Cluster)
declare -A total fails
failed_list=()
while read -r test outcome; do
  stem=${test%%@*}
  pass=
  [ "$stem" != "$test" ] && pass=${test#*@}
  server=${pass%+module}
  mod=0
  [ "$pass" != "$server" ] || [ "$pass" = module ] && mod=1
  [ "$server" = module ] && server=
  [ -z "$server" ] && server=$base_name
  col=$(column "$stem" "$mod")
  total[$server/$col]=$((${total[$server/$col]:-0} + 1))
  if [ "$outcome" != passed ]; then
    fails[$server/$col]=$((${fails[$server/$col]:-0} + 1))
    failed_list+=("$test")
  fi
done <"$tree/compat.results"

{
  printf '| Server |'
  printf ' %s |' "${cols[@]}"
  printf '\n|---|'
  printf -- '---|%.0s' "${cols[@]}"
  printf '\n'
  for server in "$base_name" "${ran[@]}"; do
    printf '| %s |' "$server"
    for col in "${cols[@]}"; do
      n=${total[$server/$col]:-0}
      f=${fails[$server/$col]:-0}
      if [ "$n" -eq 0 ]; then
        printf ' - |'
      elif [ "$f" -eq 0 ]; then
        printf ' pass |'
      else
        printf ' FAIL %d/%d |' "$f" "$n"
      fi
    done
    printf '\n'
  done
} >"$tree/compat.md"

echo "compat.sh: $(date -u '+%Y-%m-%d %H:%M UTC'), $(wc -l <"$tree/compat.results") tests"
cat "$tree/compat.md"
for t in "${failed_list[@]}"; do echo "failed: $t"; done
for s in "${skipped[@]}"; do echo "skipped $s"; done
[ "${#skipped[@]}" -gt 0 ] && echo "(skipped servers are not in the table; what ran decides the exit status)"
echo "log: $tree/compat.log"
exit "$rc"
