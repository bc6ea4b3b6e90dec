#!/usr/bin/env bash
# The layers check must fail on this fixture, naming the upward include,
# the upward call and the cycle.
#   bash selftest.sh <check-layers.sh> <fixture library> <fixture dir>
set -uo pipefail
out=$(bash "$1" "$2" "$3" 2>&1)
status=$?
echo "$out"
fail=0
[ "$status" -ne 0 ] || { echo "selftest: the check passed"; fail=1; }
for want in "include: low.c (low) -> high.h (high)" \
            "call: low.c (low) -> high.c (high)" \
            "call: cycle "; do
  grep -qF "$want" <<<"$out" || { echo "selftest: no '$want'"; fail=1; }
done
exit "$fail"
