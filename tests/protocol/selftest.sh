#!/usr/bin/env bash
# The check of the protocol's constants (cmake/protocol.cmake -DCHECK=1,
# the ctest protocol) must catch a copy that differs: in a scratch copy of
# the files it reads, each case changes one copy alone and the check must
# fail naming it; and the tree as it is must pass.
#   bash tests/protocol/selftest.sh [cmake]
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cmake=${1:-cmake}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
# Every file protocol/constants.txt names, and the table itself.
files=$(sed -e 's/#.*//' "$top/protocol/constants.txt" | tr -s ' \t' '\n' |
  sed -n 's/^\([^:]*\.[a-z]*\):[A-Za-z_][A-Za-z0-9_]*$/\1/p' | sort -u)
(cd "$top" && cp --parents -t "$scratch" protocol/constants.txt $files) || exit 1

check() {
  "$cmake" -DCONSTANTS="$scratch/protocol/constants.txt" -DROOT="$scratch" \
    -DCHECK=1 -P "$top/cmake/protocol.cmake" 2>&1
}
if ! out=$(check); then
  echo "selftest: the check fails on the tree as it is:"
  echo "$out"
  exit 1
fi

fail=0
# name, file, sed expression, expected finding (a fixed string): tab-separated
while IFS=$'\t' read -r name file expr want; do
  [ -n "$name" ] || continue
  cp "$scratch/$file" "$scratch/$file.orig"
  sed -i "$expr" "$scratch/$file"
  if cmp -s "$scratch/$file" "$scratch/$file.orig"; then
    echo "selftest: $name: the sed changed nothing in $file"
    fail=1
  elif out=$(check); then
    echo "selftest: $name: NOT caught (the check passed)"
    fail=1
  elif grep -qF -- "$want" <<<"$out"; then
    echo "selftest: $name: caught"
  else
    echo "selftest: $name: NOT caught (wanted '$want'); the check said:"
    echo "$out" | head -n 5
    fail=1
  fi
  mv "$scratch/$file.orig" "$scratch/$file"
done <<'CASES'
a grace period changed in the prelude	lua/lib/prelude.lua	s/^local GRACE_MS = 10000/local GRACE_MS = 20000/	lua/lib/prelude.lua: GRACE_MS is 20000
a skip budget gone from the prelude	lua/lib/prelude.lua	/^local SKIP_MAX = /d	lua/lib/prelude.lua: no SKIP_MAX
an epoch's worth in a two-name local	lua/lib/prelude.lua	s/^local EPOCH_US, EPOCH_MAX = 1099511627776, 4095/local EPOCH_US, EPOCH_MAX = 1099511627776, 4096/	EPOCH_MAX is 4096
a reply code of a script	lua/release.lua	s/^local RELEASED, CANCELED = 1, 2/local RELEASED, CANCELED = 1, 3/	lua/release.lua: CANCELED is 3
the name limit of the public header	include/redturn.h	s/^#define RT_NAME_MAX 4096/#define RT_NAME_MAX 2048/	include/redturn.h: RT_NAME_MAX is 2048
a reply code of the model	model/redturn.pml	s/^#define REAP_HOLDER 2/#define REAP_HOLDER 3/	model/redturn.pml: REAP_HOLDER is 3
the table changed, not its copies	protocol/constants.txt	s/^SETTLE_MS *5000 /SETTLE_MS 6000 /	SETTLE_MS is 5000, protocol/constants.txt says SETTLE_MS = 6000
CASES
exit "$fail"
