#!/usr/bin/env bash
# The API reference, generated from the doc comments of include/redturn.h
# and of the parts it includes from include/redturn/.
#
#   bash scripts/gen-reference.sh [HEADER] > REFERENCE.md
#   bash scripts/gen-reference.sh --check FILE [HEADER]
#
# Each line '#include "redturn/<part>.h"' of the header is replaced by that
# file (found next to the header), so the reference follows the header's
# order and covers every part; each section names the file it comes from.
# Each "/* ---- Section ---- */" line of the header starts a section; each
# public declaration (an RT_EXTERN function, a typedef, a #define of an RT_
# or rt_ name) is listed with the comment right above it (or, for a one-line
# declaration, the comment after it on the same line). Declarations that
# follow one another without a blank line share the comment above the
# first. A public declaration without a comment is an error: the header is
# the reference, so every symbol says what it is.
#
# --check regenerates and compares with FILE (the committed
# docs/REFERENCE.md): it fails, showing the difference, when the two
# disagree, so the reference cannot drift from the header.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

check=
if [ "${1:-}" = "--check" ]; then
  check=${2:?--check needs the file to compare with}
  shift 2
fi
header=${1:-include/redturn.h}
# The header as the repository names it (the ctest passes an absolute path).
shown=${header#"$PWD"/}

# The header with its parts inlined, each file's lines after a
# "#@file <name>" line (and the header's own again after each part).
expand() {
  awk -v top="$header" -v shown="$shown" '
    function emit(file, name,   line, dir, ndir, part, rc) {
      print "#@file " name
      dir = file; if (!sub(/\/[^\/]*$/, "", dir)) dir = "."
      ndir = name; if (!sub(/\/[^\/]*$/, "", ndir)) ndir = "."
      while ((rc = (getline line < file)) > 0) {
        if (line ~ /^#[ \t]*include[ \t]+"redturn\/[^"]+"/) {
          part = line; sub(/^[^"]*"/, "", part); sub(/".*$/, "", part)
          emit(dir "/" part, ndir "/" part)
          print "#@file " name
        } else print line
      }
      if (rc < 0) {
        printf "gen-reference: cannot read %s\n", file > "/dev/stderr"
        failed = 1
      }
      close(file)
    }
    BEGIN { emit(top, shown); exit failed }
  '
}

generate() {
  local text
  text=$(expand) || exit 1
  awk '
    function flush_comment() { comment = ""; in_group = 0 }
    function strip(s) {
      sub(/^[ \t]*\/\*+ ?/, "", s); sub(/[ \t]*\*+\/[ \t]*$/, "", s)
      sub(/^[ \t]*\* ?/, "", s)
      return s
    }
    # The public name a declaration introduces, or "" for none.
    function decl_name(text,   t, m) {
      t = text
      gsub(/\/\*.*\*\//, "", t)
      if (t ~ /^#define[ \t]+/) {
        m = t; sub(/^#define[ \t]+/, "", m); sub(/[ \t(].*$/, "", m)
        if (m ~ /^(RT_|rt_)/ && m !~ /^RT__/ && m != "RT_EXTERN") return m
        return ""
      }
      if (t ~ /^RT_EXTERN/) {
        m = t; sub(/\(.*$/, "", m); sub(/^.*[ *]/, "", m); return m
      }
      if (t ~ /^typedef/) {
        if (t ~ /\(\*/) { m = t; sub(/^[^(]*\(\*/, "", m); sub(/\).*$/, "", m); return m }
        m = t; sub(/;.*$/, "", m); sub(/^.*[ }*]/, "", m); return m
      }
      return ""
    }
    BEGIN {
      print "# redturn API reference"
      print ""
      print "Generated from the doc comments of `include/redturn.h` and of its parts in"
      print "`include/redturn/` by `scripts/gen-reference.sh`; do not edit by hand. The"
      print "conventions (return codes, callbacks, closing) are in the header'"'"'s first"
      print "comment, and the guide is [API.md](API.md)."
      missing = 0; comment = ""; depth = 0
    }
    # Which file the lines come from (expand() marks it).
    /^#@file / { file = substr($0, 8); flush_comment(); next }
    # A comment block at the top level.
    depth == 0 && /^\/\*/ {
      if ($0 ~ /^\/\* ---- .* -+ \*\/$/) {
        s = $0; sub(/^\/\* ---- /, "", s); sub(/ -+ \*\/$/, "", s)
        printf "\n## %s\n\nIn `%s`.\n", s, file
        flush_comment(); next
      }
      text = strip($0)
      while ($0 !~ /\*\//) {
        if ((getline) <= 0) break
        text = text "\n" strip($0)
      }
      comment = text; in_group = 0
      next
    }
    /^[ \t]*$/ { if (depth == 0) flush_comment(); next }
    depth == 0 && /^(RT_EXTERN|typedef|#define)/ {
      decl = $0
      # Multi-line: macros continue with a backslash, declarations end with
      # ";" at brace depth 0.
      if (decl ~ /^#define/) {
        while (decl ~ /\\$/ && (getline) > 0) decl = decl "\n" $0
      } else {
        d = gsub(/\{/, "{", decl) - gsub(/\}/, "}", decl)
        while ((d > 0 || decl !~ /;/) && (getline line) > 0) {
          decl = decl "\n" line
          d += gsub(/\{/, "{", line) - gsub(/\}/, "}", line)
        }
      }
      name = decl_name(decl)
      if (name == "") { flush_comment(); next }
      doc = comment
      if (doc == "" && decl !~ /\n/ && decl ~ /\/\*.*\*\//) {
        doc = decl; sub(/^.*\/\*[ ]*/, "", doc); sub(/[ ]*\*\/.*$/, "", doc)
      }
      if (doc == "" && !in_group) {
        printf "%s: %s has no doc comment\n", file, name > "/dev/stderr"
        missing++
      }
      printf "\n### `%s`\n\n```c\n%s\n```\n", name, decl
      if (in_group) printf "\nSee `%s`, above.\n", first
      else if (doc != "") printf "\n%s\n", doc
      if (!in_group) first = name
      in_group = 1
      next
    }
    # Anything else (includes, conditionals, extern "C") drops the comment.
    { if (depth == 0) flush_comment() }
    END { if (missing) exit 1 }
  ' <<<"$text"
}

if [ -z "$check" ]; then
  generate
  exit 0
fi
fresh=$(mktemp)
trap 'rm -f "$fresh"' EXIT
generate >"$fresh"
if ! diff -u "$check" "$fresh"; then
  echo "gen-reference: $check is not what $header and its parts say;" \
    "run: bash scripts/gen-reference.sh > $check" >&2
  exit 1
fi
echo "gen-reference: $check matches $header and its parts"
