#!/usr/bin/env bash
# Build and run the redturn benchmark (bench/, see docs/PERFORMANCE.md).
#
#   bash scripts/bench.sh [redturn-bench options...]
#
# Installs missing Debian packages, builds a Release tree in build-bench/
# and runs build-bench/bench/redturn-bench, which starts (and stops) its own
# redis-server unless --url is given (with --cluster: a Redis Cluster of 1
# shard and one of 3, both on loopback, stopped by pid at the end). The table and the verdicts go to the
# terminal; the table, the JSON lines and the plot data are also kept in
# build-bench/results/ (RESULTS_DIR to change it). With PLOT=1 the plots of
# docs/PERFORMANCE.md are rendered from that run (scripts/plot.sh).
#
# Without --kinds the fair rows are the mutex once per script path of the
# client: the module's native commands (when module/ is built: its
# redturn_module.so is loaded into the run's server), the Functions
# library, EVALSHA. --instructions adds the instructions redis-server
# executes per grant (valgrind's callgrind, installed when missing).
#
# Examples:
#   bash scripts/bench.sh                      # the default run (< 5 min)
#   PLOT=1 bash scripts/bench.sh --repeat 3 --instructions
#                                    # the full run of docs/PERFORMANCE.md
#   bash scripts/bench.sh --points hot --modes ping,fair
#   bash scripts/bench.sh --points hot,hold --kinds mutex,rw:90,sem:4
#                                    # read-write lock and semaphore rows
#   bash scripts/bench.sh --cluster  # fair on a 3-shard vs a 1-shard cluster
#   PLOT=1 bash scripts/bench.sh               # and redraw docs/*.png
#   bash scripts/bench.sh --help
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# shellcheck source=scripts/install-missing.sh
source scripts/install-missing.sh

install_missing cmake gcc make pkg-config redis-server \
  libhiredis-dev libuv1-dev
for arg in "$@"; do
  if [ "$arg" = "--instructions" ]; then
    install_missing valgrind
  fi
done

cmake -S . -B build-bench -DCMAKE_BUILD_TYPE=Release -DREDTURN_WERROR=ON \
  -DBUILD_TESTING=OFF -DREDTURN_BUILD_EXAMPLES=OFF >/dev/null
cmake --build build-bench -j2 --target redturn-bench
# The module's row needs redturn_module.so where redturn-bench looks for it
# (build-bench/module/), when this tree builds it (REDTURN_MODULE, on by
# default). The cache says so; a pipe into `grep -q` would not do under
# pipefail (grep closes the pipe, the writer dies of SIGPIPE, the test
# fails and the module rows go missing without a word).
module_so=build-bench/module/redturn_module.so
if grep -qx 'REDTURN_MODULE:BOOL=ON' build-bench/CMakeCache.txt; then
  cmake --build build-bench -j2 --target redturn_module
  if [ ! -f "$module_so" ]; then
    echo "bench.sh: REDTURN_MODULE is on but $module_so was not built" >&2
    exit 1
  fi
fi

bench=build-bench/bench/redturn-bench
results=${RESULTS_DIR:-build-bench/results}
mkdir -p "$results"

for arg in "$@"; do
  case "$arg" in
    -h|--help) exec "$bench" --help ;;
  esac
done

echo "bench.sh: $bench $* (results in $results)" >&2
status=0
"$bench" --json "$results/bench.jsonl" --data "$results" "$@" \
  | tee "$results/bench.txt" || status=$?

if [ "${PLOT:-0}" = "1" ] && [ "$status" -eq 0 ]; then
  bash scripts/plot.sh "$results"
fi
exit "$status"
