#!/usr/bin/env bash
# Docs that cannot drift from the code. Fails (listing each finding) when
#  1. a doc names a function, macro or error code that the code does not
#     have anywhere in its sources (a rename or a removal leaves no stale
#     name);
#  2. a doc calls something missing, "not supported yet", "not handled
#     yet" or "not implemented yet": such a sentence is true only until the
#     feature lands, so none is allowed; say what the code does instead,
#     and keep plans in the issues, history in CHANGELOG.md;
#  3. a claim that was once true and is false now comes back (the list
#     below: each pattern with the fact that makes it false).
#
#   bash scripts/check-docs.sh
#
# The docs: README.md, docs/*.md (the generated REFERENCE.md included),
# the comments of include/redturn.h and of its parts in include/redturn/,
# tests/fault/README.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

docs=(README.md docs/*.md tests/fault/README.md include/redturn.h
  include/redturn/*.h)
fail=0
finding() {
  echo "check-docs: $*" >&2
  fail=1
}

# ---- 1. names the code must have ------------------------------------------
# Every rt_/RT_ name in the code: the tree's sources and scripts, and the
# error codes that RT_ERRNO_MAP spells as XX(NAME, ...).
code=$(
  {
    git ls-files -- src include tests tools bench examples scripts cmake \
      CMakeLists.txt 2>/dev/null | xargs cat 2>/dev/null |
      grep -oE '\b(rt|RT)_[A-Za-z0-9_]+'
    grep -oE '^ *XX\([A-Z]+' include/redturn.h | sed 's/^ *XX(/RT_/'
  } | sort -u
)
for f in "${docs[@]}"; do
  case $f in include/*) continue ;; esac # the headers are code
  # A name followed by '*' (rt_lock_*) stands for a family: skip it.
  while IFS= read -r name; do
    case "$name" in *'*' | *_) continue ;; esac
    grep -qxF "$name" <<<"$code" && continue
    finding "$f names $name, which the code does not have"
  done < <(grep -oE '\b(rt|RT)_[A-Za-z0-9_]*[A-Za-z0-9_*]' "$f" | sort -u)
done

# ---- 2. "not ... yet" ------------------------------------------------------
while IFS= read -r hit; do
  finding "a feature called missing: $hit"
done < <(grep -nHiE '(not|never) (supported|handled|implemented|built|available) yet|not yet (supported|handled|implemented|built|available)' \
  "${docs[@]}" || true)

# ---- 3. claims that came true and must not come back ------------------------
# pattern<TAB>what is true instead
claims=$(
  cat <<'EOF'
Cluster is not supported	a Redis Cluster works: src/cluster.c, tests/topology/it_cluster.c
Sentinel is not handled	redis-sentinel:// works: src/sentinel.c, tests/topology/it_sentinel.c
rediss:// \(TLS\) is not supported	rediss:// works: src/tls.c, tests/topology/it_tls.c
No automatic lease renewal	rt_lock_auto_renew() renews: tests/api/it_renew.c
poll handle per connection	each connection is a uv_tcp_t stream: src/link.c
on a Redis Cluster it is refused	rt_observe works on a cluster: tests/topology/it_cluster.c
rt_observe` is refused	rt_observe works on a cluster: tests/topology/it_cluster.c
EOF
)
while IFS=$'\t' read -r pattern truth; do
  while IFS= read -r hit; do
    finding "$hit: false ($truth)"
  done < <(grep -nHE "$pattern" "${docs[@]}" || true)
done <<<"$claims"

if [ "$fail" -ne 0 ]; then
  exit 1
fi
echo "check-docs: ${#docs[@]} documents agree with the code"
