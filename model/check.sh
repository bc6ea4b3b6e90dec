#!/usr/bin/env bash
# Check the protocol model (model/redturn.pml) with SPIN, exhaustively,
# in every configuration below; or, with --defect1 or --defect-used, check
# that putting a fixed defect back makes SPIN find the violation: defect 1
# (a lost D let a short lease free other holders' permits), the '+' leak
# (a retried enqueue or try of a holder kept ended leases' permits counted)
# or the skipped fence (a grant reused the fence of a grant notice that
# went out to a waiter found gone in the same call).
#
#   bash model/check.sh [--defect1 | --defect-used | --defect-skipf] [SCRATCH_DIR]
#
# Each configuration is generated (spin -a), compiled with the system cc
# and searched in SCRATCH_DIR (default: a temporary directory). Prints one
# line per configuration: states stored, seconds, errors. Exits 0 when
# every search ends with 0 errors (with --defect1: when the search reports
# the violation, whose trail it then prints), 1 otherwise, 77 when spin or
# cc is missing.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
defect=""
scratch=""
for arg in "$@"; do
  case "$arg" in
    --defect1) defect=1 ;;
    --defect-used) defect=used ;;
    --defect-skipf) defect=skipf ;;
    -h | --help)
      sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *) scratch=$arg ;;
  esac
done
for tool in spin cc; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check.sh: $tool is not installed: skipped" >&2
    exit 77
  fi
done
if [ -z "$scratch" ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
fi
mkdir -p "$scratch"

# Each configuration: its name, the depth bound of the breadth-first
# search (0: none, the whole state space) and its spin -D options
# (model/README.md says what each one covers).
none="-DKEYLOSS=0 -DDROPS=0 -DCRASHES=0 -DNOTEFAULTS=0 -DCANCELS=0 -DEXTENDS=0"
configs=(
  "sem2-faults 0 -DNC=2 -DCAP=2 -DK0=1 -DK1=2 -DL0=2 -DL1=1 -DKEYLOSS=1 -DDROPS=0 -DCRASHES=1 -DNOTEFAULTS=1 -DCANCELS=1 -DEXTENDS=1 -DTRIES=1"
  "sem2-reconnect 0 -DNC=2 -DCAP=2 -DK0=1 -DK1=2 -DL0=2 -DL1=1 $none -UDROPS -DDROPS=1"
  "rw2-faults 0 -DRW -DNC=2 -DCAP=2 -DL0=1 -DL1=2 -DKEYLOSS=1 -DDROPS=0 -DCRASHES=1 -DNOTEFAULTS=1 -DCANCELS=1 -DEXTENDS=1 -DTRIES=1"
  "election2-faults 0 -DNC=2 -DCAP=1 -DK0=1 -DK1=1 -DL0=2 -DL1=1 -DKEYLOSS=1 -DDROPS=0 -DCRASHES=1 -DNOTEFAULTS=1 -DCANCELS=1 -DEXTENDS=1 -DTRIES=1"
  "mutex2-faults 0 -DMUTEX -DNC=2 -DL0=2 -DL1=1 -DKEYLOSS=1 -DDROPS=0 -DCRASHES=1 -DNOTEFAULTS=1 -DCANCELS=1 -DEXTENDS=1 -DTRIES=1 -DEVICTS=1"
  "mutex2-reconnect 0 -DMUTEX -DNC=2 -DL0=2 -DL1=1 $none -UDROPS -DDROPS=1"
  "mutex3-crash 22 -DMUTEX -DNC=3 -DL0=1 -DL1=1 -DL2=1 $none -UCRASHES -DCRASHES=1"
  "sem2-retry-used 0 -DNC=2 -DCAP=2 -DK0=1 -DK1=1 -DL0=1 -DL1=2 $none -UDROPS -DDROPS=1 -UTRIES -DTRIES=1"
  "sem3-keyloss 26 -DNC=3 -DCAP=3 -DK0=1 -DK1=1 -DK2=3 -DL0=1 -DL1=3 -DL2=1 $none -UKEYLOSS -DKEYLOSS=1"
)
# Defect 1's shape (a lost D): B holds 1 of 3 with a long lease, D is lost,
# A takes 1 with a short one, C asks for all 3.
# The '+' leak's shape: client 1's grant reply is lost, client 0's short
# lease ends, client 1's retried enqueue finds it ended.
used_config="sem2-retry-used-defect 0 -DDEFECT_USED=1 -DNC=2 -DCAP=2 -DK0=1 -DK1=1 -DL0=1 -DL1=2 $none -UDROPS -DDROPS=1 -UTRIES -DTRIES=1"
# The skipped fence's shape: a waiter's client crashes, the holder's next
# request is granted in the call that skips the waiter.
skipf_config="mutex3-skipf-defect 0 -DDEFECT_SKIPF=1 -DMUTEX -DNC=3 -DL0=1 -DL1=1 -DL2=1 $none -UCRASHES -DCRASHES=1"
defect1_config="sem3-keyloss-defect1 0 -DDEFECT1 -DNC=3 -DCAP=3 -DK0=1 -DK1=1 -DK2=3 -DL0=1 -DL1=3 -DL2=1 $none -UKEYLOSS -DKEYLOSS=1"

# search NAME DEPTH OPTIONS...: prints the result line; returns pan's
# error count
search() {
  local name=$1 depth=$2 dir t0 t1 out errors states
  shift 2
  dir="$scratch/$name"
  mkdir -p "$dir"
  cp "$here"/*.pml "$dir/"
  (cd "$dir" && spin -a "$@" redturn.pml >spin.log 2>&1) ||
    { cat "$dir/spin.log"; echo "check.sh: $name: spin -a failed" >&2; return 255; }
  # Breadth-first: exhaustive as depth-first, and its counterexamples are
  # the shortest.
  (cd "$dir" && cc -O1 -DSAFETY -DBFS -DCOLLAPSE -DMEMLIM=2048 -w -o pan pan.c) ||
    { echo "check.sh: $name: cc failed" >&2; return 255; }
  t0=$(date +%s.%N)
  if [ "$depth" -eq 0 ]; then
    (cd "$dir" && ./pan -w24 >pan.log 2>&1) || true
  else
    (cd "$dir" && ./pan -m"$depth" -w24 >pan.log 2>&1) || true
  fi
  t1=$(date +%s.%N)
  out="$dir/pan.log"
  errors=$(sed -n 's/.*errors: \([0-9]*\).*/\1/p' "$out" | tail -n 1)
  states=$(sed -n 's/^ *\([0-9e.+]*\) states, stored.*/\1/p' "$out" | tail -n 1)
  printf '%-22s %10s states %6.1f s  %-10s errors: %s\n' "$name" "${states:-?}" \
    "$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" \
    "$([ "$depth" -eq 0 ] && echo exhaustive || echo "depth<=$depth")" "${errors:-?}"
  if grep -q 'out of memory\|VECTORSZ' "$out" ||
     { [ "$depth" -eq 0 ] && grep -q 'max search depth too small' "$out"; }; then
    grep 'out of memory\|VECTORSZ\|max search depth too small' "$out" >&2
    return 254
  fi
  return "${errors:-255}"
}

# trail NAME OPTIONS...: the counterexample, one line per step that
# changed the state of Redis or of a client
trail() {
  local name=$1 dir
  shift 2
  dir="$scratch/$name"
  grep 'pan:1:' "$dir/pan.log" || true
  (cd "$dir" && spin -t -p -g "$@" redturn.pml 2>&1) | python3 "$here/trail.py" || true
}

if [ -n "$defect" ]; then
  if [ "$defect" = used ]; then
    config=$used_config
  elif [ "$defect" = skipf ]; then
    config=$skipf_config
  else
    config=$defect1_config
  fi
  # shellcheck disable=SC2086
  set -- $config
  name=$1
  shift
  rc=0
  search "$name" "$@" || rc=$?
  if [ "$rc" -ge 1 ] && [ "$rc" -lt 254 ] &&
     grep -q 'assertion violated' "$scratch/$name/pan.log"; then
    trail "$name" "$@"
    echo "check.sh: DEFECT $defect FOUND: SPIN reports the violation with the defect put back"
    exit 0
  fi
  echo "check.sh: defect $defect put back, but SPIN found no violation" >&2
  exit 1
fi

failed=0
for c in "${configs[@]}"; do
  # shellcheck disable=SC2086
  set -- $c
  name=$1
  shift
  rc=0
  search "$name" "$@" || rc=$?
  if [ "$rc" -ne 0 ]; then
    failed=1
    [ "$rc" -lt 254 ] && trail "$name" "$@"
  fi
done
if [ "$failed" -ne 0 ]; then
  echo "check.sh: FAILED" >&2
  exit 1
fi
echo "check.sh: every configuration checked: 0 errors"
