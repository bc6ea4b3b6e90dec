#!/usr/bin/env bash
# Build redturn and run every test against a throwaway redis-server.
#
#   bash scripts/test.sh           # build/ (plain) and build-asan/ (ASan+UBSan)
#   bash scripts/test.sh --quick   # build/ only
#   REDTURN_TEST_FILTER=unit_ bash scripts/test.sh   # only tests matching (ctest -R)
#   REDTURN_TEST_FILTER=node bash scripts/test.sh     # only the Node.js package
#
# Installs missing Debian packages first. Ends with one line
# "N passed, M failed" (over both trees; a tree that does not configure or
# build counts as one failure) and exits non-zero if anything failed or no
# test ran.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    -h | --help)
      sed -n '2,12p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "test.sh: unknown argument: $arg (try --help)" >&2
      exit 2
      ;;
  esac
done

# ---- Packages -----------------------------------------------------------------

# shellcheck source=scripts/install-missing.sh
source scripts/install-missing.sh

install_missing cmake gcc make pkg-config valgrind redis-server \
  libhiredis-dev libuv1-dev uuid-dev libcriterion-dev clang clang-format \
  libfiu-dev abigail-tools libssl-dev openssl spin
# Node.js for bindings/node (its headers ship with it: node_api.h, uv.h;
# Debian's own nodejs puts them in libnode-dev) and npm for packing it.
command -v node >/dev/null 2>&1 || install_missing nodejs
[ -f /usr/include/node/node_api.h ] || install_missing libnode-dev
command -v npm >/dev/null 2>&1 || install_missing npm

# ---- Redis --------------------------------------------------------------------

# shellcheck source=scripts/start-redis.sh
source scripts/start-redis.sh
# The module pass's server (below), if one is up, stops with the other.
module_pid=
module_dir=
stop_servers() {
  rt_redis_stop
  if [ -n "$module_pid" ]; then
    rt_redis_stop "$module_pid" "$module_dir"
  fi
}
trap stop_servers EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rt_redis_start
export REDTURN_TEST_URL="redis://127.0.0.1:${RT_REDIS_PORT}"
export REDTURN_TEST_PORT="${RT_REDIS_PORT}"
echo "test.sh: redis-server pid ${RT_REDIS_PID} on ${REDTURN_TEST_URL}"

# ---- Build and test -------------------------------------------------------------

passed=0
failed=0
ctest_args=(--output-on-failure)
if [ -n "${REDTURN_TEST_FILTER:-}" ]; then
  ctest_args+=(-R "$REDTURN_TEST_FILTER")
fi

# run_tree DIR [ENV=VALUE...] -- [cmake -D options...]
run_tree() {
  local dir=$1 envs=()
  shift
  while [ "$1" != "--" ]; do
    envs+=("$1")
    shift
  done
  shift
  echo
  echo "==== $dir: configure and build"
  if ! cmake -S . -B "$dir" "$@"; then
    echo "test.sh: $dir: configure FAILED" >&2
    failed=$((failed + 1))
    return 0
  fi
  if ! cmake --build "$dir" -j2; then
    echo "test.sh: $dir: build FAILED" >&2
    failed=$((failed + 1))
    return 0
  fi

  echo "==== $dir: ctest"
  run_ctest "$dir" "$dir/ctest-output.log" "${envs[@]}" -- "${ctest_args[@]}"
}

# run_ctest DIR LOG [ENV=VALUE...] -- [ctest args...]: one ctest run, its
# counts added to the totals.
run_ctest() {
  local dir=$1 log=$2 envs=() rc=0 out nfail ntotal
  shift 2
  while [ "$1" != "--" ]; do
    envs+=("$1")
    shift
  done
  shift
  # Each run starts from an empty server.
  redis-cli -h 127.0.0.1 -p "$RT_REDIS_PORT" flushall >/dev/null || true
  (cd "$dir" && env "${envs[@]}" ctest "$@") 2>&1 | tee "$log" || rc=$?

  out=$(grep -Eo '[0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  if [ -n "$out" ]; then
    nfail=${out%% *}
    ntotal=${out##* }
  else
    nfail=0
    ntotal=0
  fi
  # ctest failing without saying which test failed still counts.
  if [ "$rc" -ne 0 ] && [ "$nfail" -eq 0 ]; then
    echo "test.sh: $dir: ctest exited with $rc" >&2
    nfail=1
  fi
  passed=$((passed + ntotal - nfail))
  failed=$((failed + nfail))
  echo "==== $dir: $((ntotal - nfail)) passed, $nfail failed"
}

run_tree build -- \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBUILD_TESTING=ON \
  -DREDTURN_WERROR=ON -DREDTURN_ASAN=OFF

# The integration tests of build/ again on the eval path (EVALSHA, as where
# FUNCTION is refused): every test client is forced to it through
# REDTURN_TEST_SCRIPT_PATH (tests/support/rt_test.c). it_scripts and
# it_scripts_pool run the scripts' bodies with EVAL themselves, the same
# on both passes: left out. See docs/CONTRIBUTING.md.
if [ -d build ] && [ -f build/CTestTestfile.cmake ]; then
  echo
  echo "==== build: integration tests on the eval path"
  eval_args=(--output-on-failure -L integration -E '^it_scripts')
  if [ -n "${REDTURN_TEST_FILTER:-}" ]; then
    eval_args+=(-R "$REDTURN_TEST_FILTER")
  fi
  run_ctest build build/ctest-eval-output.log REDTURN_TEST_SCRIPT_PATH=eval \
    -- "${eval_args[@]}"
fi

# The integration tests and the fault suite of build/ once more in module
# mode: every redis-server a test starts loads build/'s redturn_module.so
# (REDTURN_TEST_MODULE: tools/rtserver.h, scripts/start-redis.sh), the
# shared one of REDTURN_TEST_URL is a second server started with it, and
# every test client is forced to the module path (REDTURN_TEST_SCRIPT_PATH).
# Left out as mode-independent: it_scripts* (they run the scripts' bodies
# with EVAL themselves), it_module (the module's commands, called
# directly, on servers it starts with the module) and fault_check_* (the
# checker on recorded histories, no server). See docs/CONTRIBUTING.md.
run_module_pass() {
  local module=$PWD/build/module/redturn_module.so args
  local port=$RT_REDIS_PORT pid=$RT_REDIS_PID dir=$RT_REDIS_DIR
  echo
  echo "==== build: integration tests and the fault suite in module mode"
  if [ ! -f "$module" ]; then
    echo "test.sh: $module missing" >&2
    failed=$((failed + 1))
    return 0
  fi
  if ! REDTURN_TEST_MODULE=$module rt_redis_start; then
    echo "test.sh: redis-server with the module did not start" >&2
    failed=$((failed + 1))
    RT_REDIS_PORT=$port RT_REDIS_PID=$pid RT_REDIS_DIR=$dir
    return 0
  fi
  module_pid=$RT_REDIS_PID
  module_dir=$RT_REDIS_DIR
  local mport=$RT_REDIS_PORT
  RT_REDIS_PORT=$port RT_REDIS_PID=$pid RT_REDIS_DIR=$dir
  export RT_REDIS_PORT RT_REDIS_PID RT_REDIS_DIR
  args=(--output-on-failure -L 'integration|fault' -E '^(it_scripts|it_module|fault_check_)')
  if [ -n "${REDTURN_TEST_FILTER:-}" ]; then
    args+=(-R "$REDTURN_TEST_FILTER")
  fi
  run_ctest build build/ctest-module-output.log REDTURN_TEST_MODULE="$module" \
    REDTURN_TEST_SCRIPT_PATH=module \
    REDTURN_TEST_URL="redis://127.0.0.1:$mport" REDTURN_TEST_PORT="$mport" \
    -- "${args[@]}"
  rt_redis_stop "$module_pid" "$module_dir"
  module_pid=
}
if [ -d build ] && [ -f build/CTestTestfile.cmake ]; then
  run_module_pass
fi

if [ "$quick" -eq 0 ]; then
  run_tree build-asan \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp:print_suppressions=0" \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    -- \
    -DCMAKE_BUILD_TYPE=Debug -DBUILD_TESTING=ON \
    -DREDTURN_WERROR=ON -DREDTURN_ASAN=ON
fi

# The Node.js addon as a user gets it: npm pack in bindings/node (which
# bundles the library's sources), npm install of the tarball in a scratch
# directory without the registry (the install script builds redturn.node
# with cmake), then node --test on bindings/node/tests there. Its tests count
# in the total; a pack or install that fails counts as one failure.
run_node() {
  local scratch rc=0 log npass nfail
  echo
  echo "==== bindings/node: npm pack, npm install --offline, node --test"
  scratch=$(mktemp -d)
  log="$scratch/node-test.log"
  if ! (cd bindings/node && npm pack --silent --pack-destination "$scratch" >/dev/null); then
    echo "test.sh: bindings/node: npm pack FAILED" >&2
    failed=$((failed + 1))
    rm -rf "$scratch"
    return 0
  fi
  echo '{"name":"redturn-node-test","private":true}' >"$scratch/package.json"
  if ! (cd "$scratch" && npm install --offline --no-audit --no-fund ./redturn-*.tgz); then
    echo "test.sh: bindings/node: npm install of the tarball FAILED" >&2
    failed=$((failed + 1))
    rm -rf "$scratch"
    return 0
  fi
  cp -r bindings/node/tests bindings/node/examples "$scratch/"
  redis-cli -h 127.0.0.1 -p "$RT_REDIS_PORT" flushall >/dev/null || true
  (readme="$PWD/README.md" && cd "$scratch" && REDTURN_README="$readme" \
    node --test --test-reporter=tap --test-concurrency=1 tests/*.test.js) 2>&1 | tee "$log" || rc=$?
  npass=$(grep -Eo '^# pass [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+' || echo 0)
  nfail=$(grep -Eo '^# fail [0-9]+' "$log" | tail -n 1 | grep -Eo '[0-9]+' || echo 0)
  if [ "$rc" -ne 0 ] && [ "$nfail" -eq 0 ]; then
    echo "test.sh: bindings/node: node --test exited with $rc" >&2
    nfail=1
  fi
  passed=$((passed + npass))
  failed=$((failed + nfail))
  echo "==== bindings/node: $npass passed, $nfail failed"
  rm -rf "$scratch"
}

if [ -z "${REDTURN_TEST_FILTER:-}" ] || [[ node == *"$REDTURN_TEST_FILTER"* ]]; then
  run_node
fi

# A bounded libFuzzer run over the parsers of pub/sub notices and script
# replies (ASan + UBSan), from the committed seed corpus. New inputs go to a
# scratch directory so the corpus stays as committed.
run_fuzz() {
  local dir=build-fuzz scratch
  echo
  echo "==== $dir: fuzz_reply for ${REDTURN_FUZZ_SECONDS:-30} s"
  if cmake -S . -B "$dir" -DCMAKE_C_COMPILER=clang -DREDTURN_FUZZ=ON \
       -DREDTURN_ASAN=ON -DREDTURN_WERROR=ON -DBUILD_TESTING=OFF \
       -DREDTURN_BUILD_EXAMPLES=OFF >/dev/null &&
     cmake --build "$dir" -j2 --target fuzz_reply >/dev/null; then
    scratch=$(mktemp -d)
    if "$dir/fuzz_reply" -max_total_time="${REDTURN_FUZZ_SECONDS:-30}" \
         "$scratch" tests/fuzz/corpus 2>"$dir/fuzz.log"; then
      tail -n 1 "$dir/fuzz.log"
      passed=$((passed + 1))
    else
      tail -n 30 "$dir/fuzz.log"
      failed=$((failed + 1))
    fi
    rm -rf "$scratch"
  else
    echo "test.sh: $dir: build FAILED" >&2
    failed=$((failed + 1))
  fi
}

if [ "$quick" -eq 0 ] && [ -z "${REDTURN_TEST_FILTER:-}" ]; then
  run_fuzz
fi

echo
if [ $((passed + failed)) -eq 0 ]; then
  echo "test.sh: no tests ran" >&2
fi
echo "$passed passed, $failed failed"
if [ "$failed" -ne 0 ] || [ $((passed + failed)) -eq 0 ]; then
  exit 1
fi
exit 0
