#!/usr/bin/env bash
# Check that every tracked C file is formatted as .clang-format says.
#
#   bash scripts/check-format.sh         # lists the files that differ; exit 1
#   bash scripts/check-format.sh --fix   # formats them in place
#
# Run as the ctest "format". Without clang-format it says so and exits 77
# (the ctest counts that as skipped; scripts/test.sh installs it).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v clang-format >/dev/null; then
  echo "check-format: clang-format not found: SKIPPED"
  exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "check-format: not a git checkout: SKIPPED"
  exit 77
fi

mapfile -t files < <(git ls-files '*.c' '*.h')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check-format: $f differs from .clang-format (fix: bash scripts/check-format.sh --fix)"
    bad=$((bad + 1))
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "check-format: $bad of ${#files[@]} files need formatting"
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
