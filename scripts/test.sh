#!/usr/bin/env bash
# Build redturn and run every test, side by side on every core.
#
#   bash scripts/test.sh           # everything (about 15 minutes on 2 cores)
#   bash scripts/test.sh --quick   # build/ and its passes only: no ASan tree,
#                                  # compatibility pass, Node.js or fuzz run
#   REDTURN_TEST_FILTER=it_wait bash scripts/test.sh   # only tests matching
#                                  # (ctest -R; "node" for the Node.js package)
#
# Installs missing Debian packages first. Builds build/ (plain) and
# build-asan/ (ASan + UBSan), and the servers of the compatibility pass
# (scripts/servers.sh, cached), then runs one ctest over both trees with
# every pass (cmake/TestPasses.cmake: default, eval, module, the servers
# of the compatibility pass, asan), the Node.js package and a short fuzz
# run beside it. Ends with one line "N passed, M failed" and exits
# non-zero if anything failed or no test ran.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
top=$PWD

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h | --help)
      sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "test.sh: unknown argument: $arg (try --help)" >&2
      exit 2
      ;;
  esac
done
filter=${REDTURN_TEST_FILTER:-}
run_node=1
if [ "$quick" -eq 1 ] || { [ -n "$filter" ] && [[ node != *"$filter"* ]]; }; then
  run_node=0
fi
run_ctest=1
[ "$filter" = node ] && run_ctest=0

# Each stage's wall time, printed at the end beside what it should take on
# 2 cores with the compatibility servers cached (docs/CONTRIBUTING.md).
t0=$(date +%s)
stages=()
stage_done() { # NAME START EXPECTED_S
  stages+=("$(printf '%-28s %4d s  (expected %s s)' "$1" $(($(date +%s) - $2)) "$3")")
}

# ---- Packages -----------------------------------------------------------------

# shellcheck source=scripts/install-missing.sh
source scripts/install-missing.sh

install_missing cmake gcc make pkg-config valgrind redis-server \
  libhiredis-dev libuv1-dev libcriterion-dev clang clang-format \
  libfiu-dev abigail-tools libssl-dev openssl spin
# Node.js for bindings/node (its headers ship with it: node_api.h, uv.h;
# Debian's own nodejs puts them in libnode-dev) and npm for packing it.
command -v node >/dev/null 2>&1 || install_missing nodejs
[ -f /usr/include/node/node_api.h ] || install_missing libnode-dev
command -v npm >/dev/null 2>&1 || install_missing npm
stage_done packages "$t0" 0

passed=0
failed=0
logs=$(mktemp -d)
groups=()
cleanup() {
  local pid
  # Each background stage runs in a process group of its own (set -m
  # when it starts): the group goes.
  for pid in "${groups[@]}"; do
    kill -- -"$pid" 2>/dev/null || true
  done
  rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- The compatibility servers ------------------------------------------------

# Valkey 8.0 and Redis 7.4 from ../shared/servers, built once (cached by
# checksum). scripts/compat.sh runs the whole matrix.
compat_names=(valkey-8.0.1 redis-7.4.1)
compat_list=
compat_pid=
asan_server=
if [ "$quick" -eq 0 ] && [ "$run_ctest" -eq 1 ]; then
  if bash scripts/servers.sh path "${compat_names[0]}" >/dev/null 2>"$logs/compat.skip"; then
    for name in "${compat_names[@]}"; do
      compat_list+="${compat_list:+;}$name=$(bash scripts/servers.sh path "$name")"
    done
    set -m
    # ...and an AddressSanitizer build of Valkey 8.0.1 for the module's
    # tests inside it (label asan_server).
    asan_server=$(bash scripts/servers.sh path valkey-8.0.1 --asan)
    (
      for name in "${compat_names[@]}"; do
        bash scripts/servers.sh build "$name" >/dev/null || exit 1
      done
      bash scripts/servers.sh build valkey-8.0.1 --asan >/dev/null || exit 1
    ) >"$logs/compat.log" 2>&1 &
    compat_pid=$!
    set +m
    groups+=("$compat_pid")
  else
    echo "test.sh: the compatibility pass is skipped: $(cat "$logs/compat.skip")"
  fi
fi

# ---- Build ----------------------------------------------------------------------

# configure DIR [cmake -D options...]: 0 when it configured.
configure() {
  local dir=$1
  shift
  cmake -S . -B "$dir" -DBUILD_TESTING=ON -DREDTURN_WERROR=ON "$@" \
    >"$logs/configure-$dir.log" 2>&1 ||
    { cat "$logs/configure-$dir.log"; echo "test.sh: $dir: configure FAILED" >&2; return 1; }
}

trees=(build)
[ "$quick" -eq 0 ] && trees+=(build-asan)
t_build=$(date +%s)
declare -A built
if [ "$run_ctest" -eq 1 ]; then
  echo "==== configure and build: ${trees[*]}"
  build_pids=()
  for dir in "${trees[@]}"; do
    built[$dir]=0
    if [ "$dir" = build ]; then
      configure build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DREDTURN_ASAN=OFF \
        "-DREDTURN_COMPAT_SERVERS=$compat_list" "-DREDTURN_ASAN_SERVER=$asan_server" ||
        { failed=$((failed + 1)); continue; }
    else
      configure build-asan -DCMAKE_BUILD_TYPE=Debug -DREDTURN_ASAN=ON \
        || { failed=$((failed + 1)); continue; }
    fi
    cmake --build "$dir" -j"$(nproc)" >"$logs/build-$dir.log" 2>&1 &
    build_pids+=("$dir:$!")
  done
  for entry in "${build_pids[@]}"; do
    dir=${entry%%:*}
    if wait "${entry#*:}"; then
      built[$dir]=1
    else
      grep -E 'error|Error' "$logs/build-$dir.log" | head -n 40
      echo "test.sh: $dir: build FAILED" >&2
      failed=$((failed + 1))
    fi
  done
  stage_done "build (${trees[*]})" "$t_build" 150
fi

# ---- Beside ctest: the Node.js package and the fuzz run ---------------------------

# The Node.js addon as a user gets it: npm pack in bindings/node (which
# bundles the library's sources), npm install of the tarball in a scratch
# directory without the registry (the install script builds redturn.node
# with cmake), then node --test on bindings/node/tests there, against a
# redis-server of its own. Its log ends with "node: N passed, M failed".
node_pass() {
  local scratch rc=0 log npass nfail
  scratch=$(mktemp -d)
  log="$scratch/node-test.log"
  # shellcheck source=scripts/start-redis.sh
  source scripts/start-redis.sh
  if ! rt_redis_start; then
    echo "node: 0 passed, 1 failed (redis-server did not start)"
    return 0
  fi
  trap 'rt_redis_stop; rm -rf "$scratch"' EXIT
  if ! (cd bindings/node && npm pack --silent --pack-destination "$scratch" >/dev/null); then
    echo "test.sh: bindings/node: npm pack FAILED"
    echo "node: 0 passed, 1 failed"
    return 0
  fi
  echo '{"name":"redturn-node-test","private":true}' >"$scratch/package.json"
  if ! (cd "$scratch" && npm install --offline --no-audit --no-fund ./redturn-*.tgz); then
    echo "test.sh: bindings/node: npm install of the tarball FAILED"
    echo "node: 0 passed, 1 failed"
    return 0
  fi
  cp -r bindings/node/tests bindings/node/examples "$scratch/"
  # TypeScript for the check of index.d.ts (tests/types.test.js), from the
  # npm registry once into a cache; without it that test says it skipped.
  local tsc_dir=${XDG_CACHE_HOME:-$HOME/.cache}/redturn/tsc
  if [ ! -x "$tsc_dir/node_modules/typescript/bin/tsc" ]; then
    mkdir -p "$tsc_dir" && (cd "$tsc_dir" && timeout 120 npm install --no-audit --no-fund \
      --no-save typescript@5 @types/node@20 >/dev/null 2>&1) ||
      echo "test.sh: typescript could not be installed: the index.d.ts check skips"
  fi
  (readme="$top/README.md" && tarball=$(ls "$scratch"/redturn-*.tgz) && cd "$scratch" &&
    REDTURN_README="$readme" REDTURN_NODE_TARBALL="$tarball" REDTURN_TSC_DIR="$tsc_dir" \
    REDTURN_TEST_URL="redis://127.0.0.1:${RT_REDIS_PORT}" \
    REDTURN_TEST_PORT="${RT_REDIS_PORT}" \
    node --test --test-reporter=tap --test-concurrency=1 tests/*.test.js) >"$log" 2>&1 || rc=$?
  cat "$log"
  npass=$(grep -Eo '^# pass [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+' || echo 0)
  nfail=$(grep -Eo '^# fail [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+' || echo 0)
  if [ "$rc" -ne 0 ] && [ "$nfail" -eq 0 ]; then
    echo "test.sh: bindings/node: node --test exited with $rc"
    nfail=1
  fi
  echo "node: $npass passed, $nfail failed"
}

# A bounded libFuzzer run over the parsers of pub/sub notices and script
# replies (ASan + UBSan), from the committed seed corpus. New inputs go to a
# scratch directory so the corpus stays as committed.
fuzz_pass() {
  local dir=build-fuzz scratch
  if cmake -S . -B "$dir" -DCMAKE_C_COMPILER=clang -DREDTURN_FUZZ=ON \
       -DREDTURN_ASAN=ON -DREDTURN_WERROR=ON -DBUILD_TESTING=OFF \
       -DREDTURN_BUILD_EXAMPLES=OFF -DREDTURN_MODULE=OFF >/dev/null &&
     cmake --build "$dir" -j"$(nproc)" --target fuzz_reply >/dev/null; then
    scratch=$(mktemp -d)
    if "$dir/fuzz_reply" -max_total_time="${REDTURN_FUZZ_SECONDS:-30}" \
         "$scratch" tests/fuzz/corpus 2>"$dir/fuzz.log"; then
      tail -n 1 "$dir/fuzz.log"
      echo "fuzz: 1 passed, 0 failed"
    else
      tail -n 30 "$dir/fuzz.log"
      echo "fuzz: 0 passed, 1 failed"
    fi
    rm -rf "$scratch"
  else
    echo "test.sh: $dir: build FAILED"
    echo "fuzz: 0 passed, 1 failed"
  fi
}

side=()
side_pids=()
t_side=$(date +%s)
set -m
if [ "$run_node" -eq 1 ]; then
  node_pass >"$logs/node.log" 2>&1 &
  side+=(node)
  side_pids+=($!)
fi
if [ "$quick" -eq 0 ] && [ -z "$filter" ]; then
  fuzz_pass >"$logs/fuzz.log" 2>&1 &
  side+=(fuzz)
  side_pids+=($!)
fi
set +m
groups+=("${side_pids[@]}")

# ---- ctest: every tree and pass at once -------------------------------------------

# One ctest over both trees (a CTestTestfile naming them), so one
# scheduler shares the machine: each test takes slots of the resource
# "load" by its weight (cmake/TestPasses.cmake), 8 per core. No shared
# server: each test process starts its own (REDTURN_TEST_URL unset).
if [ "$run_ctest" -eq 1 ]; then
  if [ -n "$compat_pid" ]; then
    t_compat=$(date +%s)
    if ! wait "$compat_pid"; then
      cat "$logs/compat.log"
      echo "test.sh: building the compatibility servers FAILED" >&2
      failed=$((failed + 1))
    fi
    stage_done "waiting for the servers" "$t_compat" 0
  fi
  all=$top/build-all
  mkdir -p "$all"
  : >"$all/CTestTestfile.cmake"
  for dir in "${trees[@]}"; do
    [ "${built[$dir]:-0}" -eq 1 ] && echo "subdirs(\"$top/$dir\")" >>"$all/CTestTestfile.cmake"
  done
  slots=$(($(nproc) * 8))
  printf '{"version":{"major":1,"minor":0},"local":[{"load":[{"id":"0","slots":%d}]}]}\n' \
    "$slots" >"$all/resources.json"
  ctest_args=(--output-on-failure -j"$slots" --resource-spec-file "$all/resources.json")
  [ -n "$filter" ] && ctest_args+=(-R "$filter")
  echo
  echo "==== ctest: ${trees[*]}, every pass, $slots slots"
  t_ctest=$(date +%s)
  rc=0
  (cd "$all" && env -u REDTURN_TEST_URL -u REDTURN_TEST_PORT \
    -u REDTURN_TEST_SCRIPT_PATH -u REDTURN_TEST_MODULE \
    ctest "${ctest_args[@]}") 2>&1 | tee "$logs/ctest.log" || rc=$?
  stage_done "ctest (every pass)" "$t_ctest" 600
  # Each pass's test time (the sum over its tests: they run side by side),
  # beside what it should be on 2 cores.
  echo
  echo "==== test time per pass (sum over its tests)"
  for entry in default:800 eval:320 module:680 compat:1450 asan:600; do
    pass=${entry%%:*}
    got=$(sed -n "s/^$pass *= *\([0-9.]*\) sec\*proc.*/\1/p" "$logs/ctest.log" | head -n 1)
    [ -n "$got" ] && printf '%-10s %8s s  (expected %s s)\n' "$pass" "$got" "${entry#*:}"
  done
  out=$(grep -Eo '[0-9]+ tests? failed out of [0-9]+' "$logs/ctest.log" | tail -n 1 || true)
  nfail=0
  ntotal=0
  if [ -n "$out" ]; then
    nfail=${out%% *}
    ntotal=${out##* }
  fi
  # ctest failing without saying which test failed still counts.
  if [ "$rc" -ne 0 ] && [ "$nfail" -eq 0 ]; then
    echo "test.sh: ctest exited with $rc" >&2
    nfail=1
  fi
  passed=$((passed + ntotal - nfail))
  failed=$((failed + nfail))
fi

for i in "${!side[@]}"; do
  name=${side[$i]}
  wait "${side_pids[$i]}" || true
  echo
  echo "==== $name"
  cat "$logs/$name.log"
  counts=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed" "$logs/$name.log" | tail -n 1 || true)
  if [ -z "$counts" ]; then
    failed=$((failed + 1))
    continue
  fi
  counts=${counts#"$name: "}
  passed=$((passed + ${counts%% passed*}))
  counts=${counts#* passed, }
  failed=$((failed + ${counts%% failed*}))
done
[ "${#side[@]}" -gt 0 ] && stage_done "$(IFS=,; echo "${side[*]}") (beside ctest)" "$t_side" 600

echo
echo "==== wall time per stage"
printf '%s\n' "${stages[@]}"
printf '%-28s %4d s  (expected 900 s)\n' total $(($(date +%s) - t0))
echo
if [ $((passed + failed)) -eq 0 ]; then
  echo "test.sh: no tests ran" >&2
fi
echo "$passed passed, $failed failed"
if [ "$failed" -ne 0 ] || [ $((passed + failed)) -eq 0 ]; then
  exit 1
fi
exit 0
