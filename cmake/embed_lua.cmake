# Turn Lua scripts into C, so a program carries them without reading files
# at run time: the library's lua/*.lua. Run as a script:
#
#   cmake -DLUA_FILES=a.lua|b.lua [-DLIB_FILES=lib/x.lua|...] -DOUT_DIR=<dir>
#         [-DNAME=rt_scripts] [-DPREFIX=rt__] -P embed_lua.cmake
#
# Lists are separated by '|' (a ';' would be split on the way through
# add_custom_command). Writes <dir>/<NAME>.h and <dir>/<NAME>.c (NAME:
# rt_scripts unless given); with the default PREFIX rt__ they declare
#
#   typedef struct rt__script {
#     const char *name; const char *body; size_t len; const char *sha;
#   } rt__script;
#   enum { RT__SCRIPT_<NAME> = 0, ..., RT__SCRIPT_COUNT };
#   extern const rt__script rt__scripts[RT__SCRIPT_COUNT];
#
# and another PREFIX (a C identifier start, e.g. xy_) replaces rt__ in every
# name and, upper-cased, RT__ (xy_script, xy_scripts[], XY_SCRIPT_<NAME>).
# One entry per LUA_FILES file, sorted by file name. body holds the bytes
# Redis will run plus a terminating NUL: the LIB_FILES (lua/lib/*.lua, the
# shared prelude, in file name order, each ending in a newline) followed by
# the exact bytes of the file. len is the byte count without the NUL, and sha
# is the lowercase hex SHA1 of those bytes: the name Redis gives the script
# for EVALSHA. Without LIB_FILES the body is exactly the file. Needs nothing
# but CMake.

cmake_minimum_required(VERSION 3.16)

if(NOT DEFINED OUT_DIR OR OUT_DIR STREQUAL "")
  message(FATAL_ERROR "embed_lua.cmake: OUT_DIR is not set")
endif()
if(NOT DEFINED NAME OR NAME STREQUAL "")
  set(NAME rt_scripts)
endif()
if(NOT DEFINED PREFIX OR PREFIX STREQUAL "")
  set(PREFIX rt__)
endif()
string(MAKE_C_IDENTIFIER "${PREFIX}" _p)
string(MAKE_C_IDENTIFIER "${NAME}" _name_ident)
if(NOT _p STREQUAL PREFIX OR NOT _name_ident STREQUAL NAME)
  message(FATAL_ERROR "embed_lua.cmake: NAME and PREFIX must be C identifiers")
endif()
string(TOUPPER "${PREFIX}" _P)
string(TOUPPER "${NAME}" _guard)

string(REPLACE "|" ";" _files "${LUA_FILES}")
list(REMOVE_ITEM _files "")
string(REPLACE "|" ";" _libs "${LIB_FILES}")
list(REMOVE_ITEM _libs "")

file(MAKE_DIRECTORY "${OUT_DIR}")

function(rt_read_hex path out_hex)
  if(NOT EXISTS "${path}")
    message(FATAL_ERROR "embed_lua.cmake: ${path} does not exist")
  endif()
  file(READ "${path}" _hex HEX)
  set(${out_hex} "${_hex}" PARENT_SCOPE)
endfunction()

# SHA1 of the bytes of the given files, concatenated. file(READ) drops CR
# bytes, so the exact way is `cmake -E cat` (3.18); older CMake hashes the
# text and refuses files it cannot read exactly.
function(rt_sha1_of_files out_sha)
  if(CMAKE_VERSION VERSION_GREATER_EQUAL 3.18)
    set(_tmp "${OUT_DIR}/${NAME}.tmp")
    execute_process(COMMAND "${CMAKE_COMMAND}" -E cat ${ARGN}
      OUTPUT_FILE "${_tmp}" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "embed_lua.cmake: cannot read ${ARGN}")
    endif()
    file(SHA1 "${_tmp}" _sha)
    file(REMOVE "${_tmp}")
  else()
    set(_all "")
    foreach(_f IN LISTS ARGN)
      file(READ "${_f}" _text)
      file(READ "${_f}" _hex HEX)
      string(LENGTH "${_text}" _tlen)
      string(LENGTH "${_hex}" _hlen)
      math(EXPR _hlen "${_hlen} / 2")
      if(NOT _tlen EQUAL _hlen)
        message(FATAL_ERROR
          "embed_lua.cmake: ${_f} holds a CR or NUL byte (needs CMake >= 3.18)")
      endif()
      string(APPEND _all "${_text}")
    endforeach()
    string(SHA1 _sha "${_all}")
  endif()
  string(TOLOWER "${_sha}" _sha)
  set(${out_sha} "${_sha}" PARENT_SCOPE)
endfunction()

# The prelude shared by every script: its files in name order, each made to
# end in a newline so the next one starts on a line of its own.
set(_newline_file "${OUT_DIR}/${NAME}_newline.txt")
file(WRITE "${_newline_file}" "\n")
set(_prelude_parts "")
set(_prelude_hex "")
set(_prelude_names "")
set(_lib_keyed "")
foreach(_f IN LISTS _libs)
  get_filename_component(_n "${_f}" NAME)
  list(APPEND _lib_keyed "${_n}|${_f}")
endforeach()
list(SORT _lib_keyed)
foreach(_entry IN LISTS _lib_keyed)
  string(REGEX REPLACE "^[^|]*\\|" "" _path "${_entry}")
  rt_read_hex("${_path}" _hex)
  list(APPEND _prelude_parts "${_path}")
  if(NOT _hex MATCHES "0a$")
    string(APPEND _hex "0a")
    list(APPEND _prelude_parts "${_newline_file}")
  endif()
  string(APPEND _prelude_hex "${_hex}")
  get_filename_component(_n "${_path}" NAME)
  list(APPEND _prelude_names "lua/lib/${_n}")
endforeach()

# Sort by file name (not by full path) so the enum order is stable.
set(_keyed "")
foreach(_f IN LISTS _files)
  get_filename_component(_n "${_f}" NAME)
  list(APPEND _keyed "${_n}|${_f}")
endforeach()
list(SORT _keyed)

# 16 bytes per line of the byte arrays. CMake regexes have no {n}, so spell
# the repetition out.
set(_line_re "")
foreach(_i RANGE 1 16)
  string(APPEND _line_re "0x[0-9a-f][0-9a-f], ")
endforeach()

set(_script_names "")
set(_enum "")
set(_bodies "")
set(_table "")
set(_seen "")
set(_index 0)
foreach(_entry IN LISTS _keyed)
  string(REGEX REPLACE "^[^|]*\\|" "" _path "${_entry}")
  get_filename_component(_name "${_path}" NAME)
  list(APPEND _script_names "${_name}")
  string(REGEX REPLACE "\\.lua$" "" _name "${_name}")

  # An identifier-safe form of the name for the enum and the array.
  string(MAKE_C_IDENTIFIER "${_name}" _ident)
  string(TOUPPER "${_ident}" _upper)
  string(TOLOWER "${_ident}" _lower)
  if(_upper IN_LIST _seen)
    message(FATAL_ERROR
      "embed_lua.cmake: two Lua files map to ${_P}SCRIPT_${_upper}")
  endif()
  list(APPEND _seen "${_upper}")

  rt_read_hex("${_path}" _hex)
  set(_with_prelude "")
  if(_prelude_names)
    set(_with_prelude " (after the prelude)")
    set(_hex "${_prelude_hex}${_hex}")
    rt_sha1_of_files(_sha ${_prelude_parts} "${_path}")
  else()
    file(SHA1 "${_path}" _sha)
    string(TOLOWER "${_sha}" _sha)
  endif()
  string(LENGTH "${_hex}" _hexlen)
  math(EXPR _len "${_hexlen} / 2")

  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1, " _bytes "${_hex}")
  string(REGEX REPLACE "(${_line_re})" "\\1\n  " _bytes "${_bytes}")
  string(REGEX REPLACE " +\n" "\n" _bytes "${_bytes}")

  # C string literal for the name; MAKE_C_IDENTIFIER already kept only safe
  # characters, but the real name may hold others: escape the two that
  # matter.
  string(REPLACE "\\" "\\\\" _cname "${_name}")
  string(REPLACE "\"" "\\\"" _cname "${_cname}")

  if(_index EQUAL 0)
    string(APPEND _enum "  ${_P}SCRIPT_${_upper} = 0,\n")
  else()
    string(APPEND _enum "  ${_P}SCRIPT_${_upper},\n")
  endif()
  string(APPEND _bodies
    "/* ${_name}.lua${_with_prelude}: ${_len} bytes, sha1 ${_sha} */\n"
    "static const unsigned char ${PREFIX}script_body_${_lower}[] = {\n"
    "  ${_bytes}0x00\n"
    "};\n\n")
  string(APPEND _table
    "  {\"${_cname}\", (const char *)${PREFIX}script_body_${_lower}, ${_len}u,\n"
    "   \"${_sha}\"},\n")
  math(EXPR _index "${_index} + 1")
endforeach()

string(REPLACE ";" ", " _script_names "${_script_names}")
if(_prelude_names)
  string(REPLACE ";" ", " _body_desc "${_prelude_names}")
  set(_body_desc "the bytes of ${_body_desc}, then those of the file")
else()
  set(_body_desc "exactly the bytes of the file")
endif()

set(_header "/* Generated by cmake/embed_lua.cmake from ${_script_names}. Do not edit. */
#ifndef ${_guard}_H
#define ${_guard}_H

#include <stddef.h>

/* One embedded Lua script. body is NUL-terminated and holds len bytes:
 * ${_body_desc}.
 * sha is the lowercase hex SHA1 of those bytes, the name Redis gives the
 * script for EVALSHA. */
typedef struct ${PREFIX}script {
  const char *name; /* file name without .lua */
  const char *body;
  size_t len;
  const char *sha;
} ${PREFIX}script;

/* Indexes into ${PREFIX}scripts, one per <name>.lua, sorted by file name. */
enum {
${_enum}  ${_P}SCRIPT_COUNT
};

extern const ${PREFIX}script ${PREFIX}scripts[${_P}SCRIPT_COUNT];

#endif /* ${_guard}_H */
")

if(_index EQUAL 0)
  # No scripts: the array is declared but never defined (nothing may index
  # an array of zero elements), and the file must still hold a declaration.
  set(_source "/* Generated by cmake/embed_lua.cmake: no Lua files. Do not edit. */
#include \"${NAME}.h\"

typedef int ${PREFIX}scripts_none;
")
else()
  set(_source "/* Generated by cmake/embed_lua.cmake from ${_script_names}. Do not edit. */
#include \"${NAME}.h\"

${_bodies}const ${PREFIX}script ${PREFIX}scripts[${_P}SCRIPT_COUNT] = {
${_table}};
")
endif()

file(REMOVE "${_newline_file}")
file(WRITE "${OUT_DIR}/${NAME}.h" "${_header}")
file(WRITE "${OUT_DIR}/${NAME}.c" "${_source}")
