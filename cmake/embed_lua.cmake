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
# Redis will run plus a terminating NUL: the LIB_FILES the script uses
# (lua/lib/*.lua whose top-level names it mentions, and those these
# mention; the prelude first, then file name order; each ending in a
# newline) followed by the exact bytes of the file. len is the byte count without the NUL, and sha
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

# The library files (lua/lib/*.lua): prelude.lua, then the others in file
# name order. Each one's hex
# bytes (made to end in a newline so the next one starts on a line of its
# own), the files holding them, and what it declares at its top level (for
# which script uses it).
set(_newline_file "${OUT_DIR}/${NAME}_newline.txt")
file(WRITE "${_newline_file}" "\n")
set(_lib_keyed "")
foreach(_f IN LISTS _libs)
  get_filename_component(_n "${_f}" NAME)
  list(APPEND _lib_keyed "${_n}|${_f}")
endforeach()
list(SORT _lib_keyed)
# The prelude first: the other files build on it (a file may use the files
# before it, never those after).
list(FILTER _lib_keyed EXCLUDE REGEX "^prelude\\.lua\\|")
foreach(_f IN LISTS _libs)
  get_filename_component(_n "${_f}" NAME)
  if(_n STREQUAL "prelude.lua")
    list(INSERT _lib_keyed 0 "${_n}|${_f}")
  endif()
endforeach()
set(_lib_ids "")
set(_lib_index 0)
foreach(_entry IN LISTS _lib_keyed)
  string(REGEX REPLACE "^[^|]*\\|" "" _path "${_entry}")
  get_filename_component(_n "${_path}" NAME)
  set(_lib_path_${_lib_index} "${_path}")
  set(_lib_name_${_lib_index} "lua/lib/${_n}")
  rt_read_hex("${_path}" _hex)
  set(_lib_parts_${_lib_index} "${_path}")
  if(NOT _hex MATCHES "0a$")
    string(APPEND _hex "0a")
    list(APPEND _lib_parts_${_lib_index} "${_newline_file}")
  endif()
  set(_lib_hex_${_lib_index} "${_hex}")
  list(APPEND _lib_ids ${_lib_index})
  math(EXPR _lib_index "${_lib_index} + 1")
endforeach()

# Lua text as a CMake list of lines: the characters a list would split or
# bracket on (; [ ]) and backslashes become control characters, undone by
# rt_lua_text.
string(ASCII 1 _c_sc)
string(ASCII 2 _c_lb)
string(ASCII 3 _c_rb)
string(ASCII 4 _c_bs)
function(rt_lua_lines path out)
  file(READ "${path}" _t)
  string(REPLACE "\\" "${_c_bs}" _t "${_t}")
  string(REPLACE ";" "${_c_sc}" _t "${_t}")
  string(REPLACE "[" "${_c_lb}" _t "${_t}")
  string(REPLACE "]" "${_c_rb}" _t "${_t}")
  string(REGEX REPLACE "\n$" "" _t "${_t}")
  string(REPLACE "\n" ";" _t "${_t}")
  set(${out} "${_t}" PARENT_SCOPE)
endfunction()
function(rt_lua_text text out)
  string(REPLACE "${_c_sc}" ";" _t "${text}")
  string(REPLACE "${_c_lb}" "[" _t "${_t}")
  string(REPLACE "${_c_rb}" "]" _t "${_t}")
  string(REPLACE "${_c_bs}" "\\" _t "${_t}")
  set(${out} "${_t}" PARENT_SCOPE)
endfunction()
# The text of a Lua file without its comments, for looking up names.
function(rt_lua_code path out)
  file(READ "${path}" _t)
  string(REPLACE ";" " " _t "${_t}")
  string(REGEX REPLACE "--[^\n]*" "" _t "${_t}")
  set(${out} "${_t}" PARENT_SCOPE)
endfunction()
# 1 in out if code mentions any of the names (whole words).
function(rt_mentions code names out)
  set(_hit 0)
  foreach(_nm IN LISTS names)
    if(code MATCHES "(^|[^A-Za-z0-9_.])${_nm}([^A-Za-z0-9_]|$)")
      set(_hit 1)
      break()
    endif()
  endforeach()
  set(${out} ${_hit} PARENT_SCOPE)
endfunction()

# A library file for the Functions library: its top level may only declare
# (`local function f`, `local a, b = ...`, each such declaration on one
# line) and comment. Declarations whose values are constants (numbers,
# quoted strings) stay as they are, evaluated once when the library loads;
# the others (per-call state: KEYS, ARGV, caches) keep their `local` line
# without a value and get it at the start of every call, from the file's
# init function rt__init_<n>(KEYS, ARGV), so one call never sees another's.
# Sets _lib_fn_text_<i> (the text), _lib_names_<i> (every name declared)
# and _lib_init_<i> (1 when the file has an init function).
set(_const_re "^ *([0-9]+|'[^']*'|\"[^\"]*\")( *, *([0-9]+|'[^']*'|\"[^\"]*\"))* *$")
foreach(_i IN LISTS _lib_ids)
  rt_lua_lines("${_lib_path_${_i}}" _lines)
  set(_text "")
  set(_init "")
  set(_names "")
  set(_lineno 0)
  set(_prev_local 0)
  foreach(_line IN LISTS _lines)
    math(EXPR _lineno "${_lineno} + 1")
    set(_where "${_lib_name_${_i}}:${_lineno}")
    if(_prev_local AND _line MATCHES "^[ \t]")
      message(FATAL_ERROR "embed_lua.cmake: ${_where}: a top-level local "
        "declaration continues here; keep each on one line (the Functions "
        "library moves its value into a per-call init)")
    endif()
    set(_prev_local 0)
    if(_line MATCHES "^local function ([A-Za-z_][A-Za-z0-9_]*)")
      list(APPEND _names "${CMAKE_MATCH_1}")
      string(APPEND _text "${_line}\n")
    elseif(_line MATCHES "^local ([A-Za-z_][A-Za-z0-9_]*( *, *[A-Za-z_][A-Za-z0-9_]*)*) *(=(.*))?$")
      set(_prev_local 1)
      set(_decl "${CMAKE_MATCH_1}")
      set(_value "${CMAKE_MATCH_4}")
      string(REGEX REPLACE " *--.*$" "" _value_code "${_value}")
      string(REGEX REPLACE "[ ,]+" ";" _declared "${_decl}")
      list(APPEND _names ${_declared})
      if(NOT _value_code STREQUAL "" AND _value_code MATCHES "${_const_re}")
        string(APPEND _text "${_line}\n")
      else()
        string(APPEND _text "local ${_decl} -- set per call: rt__init_${_i}\n")
        if(_value_code STREQUAL "")
          set(_value_code " nil")
        endif()
        string(APPEND _init "  ${_decl} =${_value_code}\n")
      endif()
    elseif(_line MATCHES "^(--|end|$|[ \t])")
      string(APPEND _text "${_line}\n")
    else()
      message(FATAL_ERROR "embed_lua.cmake: ${_where}: the top level of a "
        "library file may only declare locals and functions (the Functions "
        "library runs it once, at FUNCTION LOAD), not: ${_line}")
    endif()
  endforeach()
  set(_lib_init_${_i} 0)
  if(NOT _init STREQUAL "")
    set(_lib_init_${_i} 1)
    string(APPEND _text "local function rt__init_${_i}(KEYS, ARGV)\n${_init}end\n")
  endif()
  set(_lib_fn_text_${_i} "${_text}")
  set(_lib_names_${_i} "${_names}")
  rt_lua_code("${_lib_path_${_i}}" _lib_code_${_i})
endforeach()

# The library files a piece of code needs: those whose names it mentions,
# and those these mention, in file name order.
function(rt_needed code out)
  set(_need "")
  list(LENGTH _lib_ids _n)
  if(_n GREATER 0)
    math(EXPR _last "${_n} - 1")
    set(_want_code "${code}")
    # Later files may use earlier ones, never the reverse: walk backwards.
    foreach(_k RANGE ${_last} 0 -1)
      rt_mentions("${_want_code}" "${_lib_names_${_k}}" _hit)
      if(_hit)
        list(INSERT _need 0 ${_k})
        string(APPEND _want_code "\n${_lib_code_${_k}}")
      endif()
    endforeach()
  endif()
  set(${out} "${_need}" PARENT_SCOPE)
endfunction()

# Sort by file name (not by full path) so the enum order is stable.
set(_keyed "")
foreach(_f IN LISTS _files)
  get_filename_component(_n "${_f}" NAME)
  list(APPEND _keyed "${_n}|${_f}")
endforeach()
list(SORT _keyed)

# Read-only scripts (their Functions get flags no-writes, for FCALL_RO):
# names without .lua, '|'-separated.
if(NOT DEFINED RO_SCRIPTS)
  set(RO_SCRIPTS "inspect|pool_inspect")
endif()
string(REPLACE "|" ";" _ro_scripts "${RO_SCRIPTS}")
# Scripts that free or keep memory (their Functions get flags allow-oom,
# their EVALSHA bodies open with "#!lua flags=allow-oom"): Redis refuses a
# Function without it when used memory is over maxmemory, and a flagless
# script at its first write that may take memory; a refused release or
# reap stalls the queue.
if(NOT DEFINED OOM_SCRIPTS)
  set(OOM_SCRIPTS
    "release|reap|extend|evict|pool_release|pool_reap|pool_extend|proclaim")
endif()
string(REPLACE "|" ";" _oom_scripts "${OOM_SCRIPTS}")
# Scripts with a second form for retries, "<name>_again" (a Function and an
# EVALSHA script of their own, flags allow-oom, opening with
# `local RT_AGAIN = true` after the library files): a retried enqueue
# still finds its request, or grants it, when used memory is over
# maxmemory; the script itself refuses what would add a request then
# (lua/lib/prelude.lua: out_of_memory). src/calls.c sends retries there.
if(NOT DEFINED AGAIN_SCRIPTS)
  set(AGAIN_SCRIPTS "enqueue|pool_enqueue")
endif()
string(REPLACE "|" ";" _again_scripts "${AGAIN_SCRIPTS}")
file(WRITE "${OUT_DIR}/${NAME}_oom_head.lua" "#!lua flags=allow-oom\n")
file(WRITE "${OUT_DIR}/${NAME}_again_mark.lua" "local RT_AGAIN = true\n")
rt_read_hex("${OUT_DIR}/${NAME}_oom_head.lua" _oom_head_hex)
rt_read_hex("${OUT_DIR}/${NAME}_again_mark.lua" _again_mark_hex)

# 16 bytes per line of the byte arrays. CMake regexes have no {n}, so spell
# the repetition out.
set(_line_re "")
foreach(_i RANGE 1 16)
  string(APPEND _line_re "0x[0-9a-f][0-9a-f], ")
endforeach()
function(rt_c_bytes hex out)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1, " _bytes "${hex}")
  string(REGEX REPLACE "(${_line_re})" "\\1\n  " _bytes "${_bytes}")
  string(REGEX REPLACE " +\n" "\n" _bytes "${_bytes}")
  set(${out} "${_bytes}" PARENT_SCOPE)
endfunction()

# The Functions library, with @LIB@ for its name (a hash of the text).
set(_fnlib "#!lua name=@LIB@\n-- Generated by cmake/embed_lua.cmake from lua/. Do not edit.\n")
foreach(_i IN LISTS _lib_ids)
  string(APPEND _fnlib "\n-- ${_lib_name_${_i}}\n${_lib_fn_text_${_i}}")
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

  # The library files this script uses, before its own bytes.
  rt_lua_code("${_path}" _code)
  rt_needed("${_code}" _need)
  rt_read_hex("${_path}" _hex)
  set(_with_prelude "")
  set(_parts "")
  set(_prelude_hex "")
  set(_used "")
  foreach(_k IN LISTS _need)
    list(APPEND _parts ${_lib_parts_${_k}})
    string(APPEND _prelude_hex "${_lib_hex_${_k}}")
    list(APPEND _used "${_lib_name_${_k}}")
  endforeach()
  if(_parts)
    string(REPLACE ";" ", " _used_desc "${_used}")
    set(_with_prelude " (after ${_used_desc})")
    set(_hex "${_prelude_hex}${_hex}")
    rt_sha1_of_files(_sha ${_parts} "${_path}")
  else()
    file(SHA1 "${_path}" _sha)
    string(TOLOWER "${_sha}" _sha)
  endif()
  if(_name IN_LIST _oom_scripts)
    # Its EVALSHA body runs out of memory too: a flagless script is refused
    # at its first write that may take memory (a leader's proclaim).
    set(_hex "${_oom_head_hex}${_hex}")
    rt_sha1_of_files(_sha "${OUT_DIR}/${NAME}_oom_head.lua" ${_parts} "${_path}")
    set(_with_prelude "${_with_prelude}, flags allow-oom")
  endif()
  string(LENGTH "${_hex}" _hexlen)
  math(EXPR _len "${_hexlen} / 2")
  rt_c_bytes("${_hex}" _bytes)

  # Its Function: the per-call init of each library file it uses, then
  # its own text, as the callback's body (KEYS and ARGV its arguments).
  set(_ro 0)
  set(_flags "")
  if(_name IN_LIST _ro_scripts)
    set(_ro 1)
    set(_flags " flags = {'no-writes'},")
  elseif(_name IN_LIST _oom_scripts)
    set(_flags " flags = {'allow-oom'},")
  endif()
  string(APPEND _fnlib "\n-- lua/${_name}.lua\n"
    "redis.register_function{function_name = '@LIB@_${_name}',${_flags}\n"
    "callback = function(KEYS, ARGV)\n")
  foreach(_k IN LISTS _need)
    if(_lib_init_${_k})
      string(APPEND _fnlib "rt__init_${_k}(KEYS, ARGV)\n")
    endif()
  endforeach()
  rt_lua_lines("${_path}" _lines)
  string(REPLACE ";" "\n" _lines "${_lines}")
  string(APPEND _fnlib "${_lines}\nend}\n")

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
    "   \"${_sha}\", \"@LIB@_${_cname}\", ${_ro}},\n")
  math(EXPR _index "${_index} + 1")

  if(_name IN_LIST _again_scripts)
    # Its retry form: the same text after the library files' and a mark.
    string(APPEND _fnlib "\n-- lua/${_name}.lua, for retries\n"
      "redis.register_function{function_name = '@LIB@_${_name}_again',"
      " flags = {'allow-oom'},\ncallback = function(KEYS, ARGV)\n"
      "local RT_AGAIN = true\n")
    foreach(_k IN LISTS _need)
      if(_lib_init_${_k})
        string(APPEND _fnlib "rt__init_${_k}(KEYS, ARGV)\n")
      endif()
    endforeach()
    string(APPEND _fnlib "${_lines}\nend}\n")
    rt_read_hex("${_path}" _own_hex)
    set(_again_hex
      "${_oom_head_hex}${_prelude_hex}${_again_mark_hex}${_own_hex}")
    rt_sha1_of_files(_again_sha "${OUT_DIR}/${NAME}_oom_head.lua" ${_parts}
      "${OUT_DIR}/${NAME}_again_mark.lua" "${_path}")
    string(LENGTH "${_again_hex}" _hexlen)
    math(EXPR _again_len "${_hexlen} / 2")
    rt_c_bytes("${_again_hex}" _bytes)
    string(APPEND _enum "  ${_P}SCRIPT_${_upper}_AGAIN,\n")
    string(APPEND _bodies
      "/* ${_name}.lua for retries (allow-oom, RT_AGAIN): ${_again_len} bytes, "
      "sha1 ${_again_sha} */\n"
      "static const unsigned char ${PREFIX}script_body_${_lower}_again[] = {\n"
      "  ${_bytes}0x00\n"
      "};\n\n")
    string(APPEND _table
      "  {\"${_cname}_again\", (const char *)${PREFIX}script_body_${_lower}_again, "
      "${_again_len}u,\n   \"${_again_sha}\", \"@LIB@_${_cname}_again\", 0},\n")
    math(EXPR _index "${_index} + 1")
  endif()
endforeach()

# The library's name: "redturn_v" and the first 12 hex digits of the SHA1
# of its text (with the name left out), so any change to a script or a
# library file makes a new library, and clients built from different
# scripts can share a server.
rt_lua_text("${_fnlib}" _fnlib)
string(SHA1 _fnsha "${_fnlib}")
string(SUBSTRING "${_fnsha}" 0 12 _fnsha)
set(_libname "redturn_v${_fnsha}")
string(REPLACE "@LIB@" "${_libname}" _fnlib "${_fnlib}")
string(REPLACE "@LIB@" "${_libname}" _table "${_table}")
file(WRITE "${OUT_DIR}/${NAME}_library.lua" "${_fnlib}")
rt_read_hex("${OUT_DIR}/${NAME}_library.lua" _fnhex)
string(LENGTH "${_fnhex}" _fnlen)
math(EXPR _fnlen "${_fnlen} / 2")
rt_c_bytes("${_fnhex}" _fnbytes)

string(REPLACE ";" ", " _script_names "${_script_names}")
if(_lib_ids)
  set(_body_desc "the bytes of the files of lua/lib/ the script uses (those
 * whose top-level names it mentions, and those these mention), in file name
 * order, then those of the file")
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
  const char *fn; /* its name in the Functions library (FCALL) */
  int ro;         /* 1: flags no-writes (FCALL_RO, EVALSHA_RO) */
} ${PREFIX}script;

/* Indexes into ${PREFIX}scripts, one per <name>.lua, sorted by file name. */
enum {
${_enum}  ${_P}SCRIPT_COUNT
};

extern const ${PREFIX}script ${PREFIX}scripts[${_P}SCRIPT_COUNT];

/* The Functions library (FUNCTION LOAD): every script as a function, the
 * lua/lib/ files once, at the top level. library_name is its name,
 * \"${_libname}\" (\"redturn_v\" and 12 hex digits of the SHA1 of its text);
 * library is NUL-terminated and holds library_len bytes. */
extern const char ${PREFIX}library_name[];
extern const char *const ${PREFIX}library;
extern const size_t ${PREFIX}library_len;

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

const char ${PREFIX}library_name[] = \"${_libname}\";

/* ${NAME}_library.lua: ${_fnlen} bytes */
static const unsigned char ${PREFIX}library_bytes[] = {
  ${_fnbytes}0x00
};
const char *const ${PREFIX}library = (const char *)${PREFIX}library_bytes;
const size_t ${PREFIX}library_len = ${_fnlen}u;
")
endif()

file(REMOVE "${_newline_file}")
file(WRITE "${OUT_DIR}/${NAME}.h" "${_header}")
file(WRITE "${OUT_DIR}/${NAME}.c" "${_source}")
