#!/usr/bin/env bash
# bench_module_step.sh SCRIPTS_DIR WORK_DIR: scripts/bench.sh builds the
# module when its tree builds it, and stops when it was not built. Runs a
# copy of bench.sh in WORK_DIR with a stub `cmake` first in PATH: its
# `--target help` is long (as make's is), its builds make the files they
# name, and redturn-bench is a stub that says it ran.
set -euo pipefail
src=$1 work=$2
rm -rf "$work"
mkdir -p "$work/scripts" "$work/stub"
cp "$src/bench.sh" "$src/install-missing.sh" "$work/scripts/"
cat >"$work/stub/cmake" <<'STUB'
#!/usr/bin/env bash
# A stand-in for cmake: see bench_module_step.sh.
case " $* " in
  *" -S "*)
    mkdir -p build-bench
    echo "REDTURN_MODULE:BOOL=${STUB_MODULE:-ON}" >build-bench/CMakeCache.txt ;;
  *" --target help "*)
    echo "... redturn_module"
    for i in $(seq 1 20000); do echo "... target_$i"; done ;;
  *" --target redturn-bench"*)
    mkdir -p build-bench/bench
    printf '#!/bin/sh\necho "bench ran $*"\n' >build-bench/bench/redturn-bench
    chmod +x build-bench/bench/redturn-bench ;;
  *" --target redturn_module"*)
    if [ -z "${STUB_NO_SO:-}" ]; then
      mkdir -p build-bench/module
      : >build-bench/module/redturn_module.so
    fi ;;
esac
STUB
chmod +x "$work/stub/cmake"
export PATH="$work/stub:$PATH"

fail() { echo "bench_module_step: FAILED: $*" >&2; exit 1; }

# The module is built with the bench.
out=$(bash "$work/scripts/bench.sh" --help 2>&1) || fail "bench.sh exited $?: $out"
[ -f "$work/build-bench/module/redturn_module.so" ] ||
  fail "the module was not built: $out"
# A module that should be there but is not stops the run, saying so.
rm -rf "$work/build-bench"
if out=$(STUB_NO_SO=1 bash "$work/scripts/bench.sh" --help 2>&1); then
  fail "bench.sh ran without the module it should have built: $out"
fi
case $out in
  *"redturn_module.so was not built"*) ;;
  *) fail "no word of the missing module: $out" ;;
esac
# REDTURN_MODULE=OFF: no module, and the bench runs.
rm -rf "$work/build-bench"
out=$(STUB_MODULE=OFF bash "$work/scripts/bench.sh" --help 2>&1) ||
  fail "bench.sh without the module exited $?: $out"
[ ! -e "$work/build-bench/module" ] || fail "a module built with REDTURN_MODULE=OFF"
echo "bench_module_step: passed"
