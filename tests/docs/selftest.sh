#!/usr/bin/env bash
# scripts/check-docs.sh must catch each drift it was made for: in a scratch
# copy of the tree, each old claim is put back alone and the check must fail
# naming it. Each case: a file, a sed expression that puts the claim back,
# and what the finding must say (the numbers are the items of the drift
# found by reading the docs claim by claim, in CHANGELOG.md).
#   bash tests/docs/selftest.sh
set -uo pipefail
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$top" && git ls-files -z | xargs -0 cp --parents -t "$scratch")
(cd "$scratch" && git init -q && git add -A) || exit 1
(cd "$scratch" && bash scripts/check-docs.sh >/dev/null 2>&1) || {
  echo "selftest: check-docs fails on the tree as it is"
  exit 1
}

fail=0
# name, file, sed expression, expected finding (a fixed string): tab-separated
while IFS=$'\t' read -r name file expr want; do
  [ -n "$name" ] || continue
  cp "$scratch/$file" "$scratch/$file.orig"
  sed -i "$expr" "$scratch/$file"
  if cmp -s "$scratch/$file" "$scratch/$file.orig"; then
    echo "selftest: $name: the sed changed nothing in $file"
    fail=1
  else
    out=$(cd "$scratch" && bash scripts/check-docs.sh 2>&1)
    if grep -qF -- "$want" <<<"$out"; then
      echo "selftest: $name: caught"
    else
      echo "selftest: $name: NOT caught (wanted '$want'); check-docs said:"
      echo "$out" | head -n 5
      fail=1
    fi
  fi
  mv "$scratch/$file.orig" "$scratch/$file"
done <<'CASES'
1 an old minimum version	README.md	s/Redis 7.0 or newer/`redis-server` 6.2 or newer/	the handshake takes Redis
2 every call an EVALSHA	README.md	s/Every operation is one call into Redis/Every operation is one Lua script run with `EVALSHA`/	Every operation is one Lua script
3 an EVALSHA fallback for old servers	include/redturn/options.h	s/(an ACL without it)/(an ACL without it, Redis before 7.0)/	Redis before 7.0
4 the handshake as it was	docs/DESIGN.md	s/`INFO server memory cluster`/`INFO server memory`/	INFO server memory
5 a section number that moved	include/redturn.h	s/(DESIGN.md section 13, Several holders)/(DESIGN.md section 12)/	is not DESIGN.md section 12
6 a renamed test	docs/CONTRIBUTING.md	s/`it_scripts_pool` (they run/`it_scripts_multi` (they run/	`it_scripts_multi` names nothing
6 a file left out of the layers' table	docs/CONTRIBUTING.md	/^| *| `multi.c` |/d	the layers' table differs
6 a function in the wrong file	docs/CONTRIBUTING.md	s/its accessors |/its accessors; `rt__lock_owns` |/	the layers' table differs
7 the trees the test command builds	README.md	s/builds the library's trees/builds two trees/	builds two trees
7 the benchmark's duration	README.md	s/every mode at every point (docs\/PERFORMANCE.md: how long)/every mode at every point, about a minute/	about a minute
8 the kinds inspect reports	include/redturn.h	s/"rwlock" (a read-write lock) or "election"; NULL/"rwlock" (a read-write lock); NULL/	"rwlock" (a read-write lock); NULL
8 RT_EKIND without elections	include/redturn.h	s/another count, read-write lock, election)")/another count, read-write lock)")/	another count, read-write lock)
9 an exit code's errors	docs/CLI.md	s/| `RT_ESERVER`, `RT_EEVICTION` |/| |/	exit 78 is also RT_EEVICTION
9 exit 71 as internal error only	docs/CLI.md	s/^| 78 |.*$/| 71 | internal error (`EX_OSERR`): out of memory, cannot fork | all |/	71 | internal error
10 a renamed test in the changelog	CHANGELOG.md	0,/^- /s/^- /- `it_scripts_multi`: /	`it_scripts_multi` names nothing
CASES
exit "$fail"
