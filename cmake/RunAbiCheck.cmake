# The "abi" CTest test, and the baseline dump, run as
#   cmake -DLIB=<libredturn.so> -DHEADERS=<include dir> -DBASELINE=<abi xml>
#         -DWORK_DIR=<scratch dir> [-DCONFIG=<build type>] [-DABIDW=...]
#         [-DABIDIFF=...] [-DUPDATE=ON]
#         -P RunAbiCheck.cmake
# Writes the ABI of LIB (public types only: what the headers under HEADERS
# declare, include/redturn.h and its parts in include/redturn/, as abidw
# reads the directory recursively; opaque structs stay opaque) with abidw
# and compares it with the baseline, the ABI of the last release, with
# abidiff:
#  - no change, or only added functions: passes;
#  - removed or changed functions or types with the SONAME of the baseline:
#    fails (a patch release must keep the ABI; bump RT_VERSION_MINOR, which
#    is part of the SONAME while the major version is 0);
#  - the same with a new SONAME: passes, printing the changes.
# With UPDATE=ON it writes the baseline instead (at a release). Without
# abigail-tools (Debian: abigail-tools), or for a build without debug
# information (CONFIG not Debug or RelWithDebInfo), it prints a line
# starting "abi: SKIPPED", which the test reports as skipped.
cmake_minimum_required(VERSION 3.16)

foreach(_v LIB HEADERS BASELINE WORK_DIR)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "RunAbiCheck.cmake: ${_v} is not set")
  endif()
endforeach()
if(NOT ABIDW)
  find_program(ABIDW abidw)
endif()
if(NOT ABIDIFF)
  find_program(ABIDIFF abidiff)
endif()
if(NOT ABIDW OR NOT ABIDIFF)
  message("abi: SKIPPED: abigail-tools (abidw, abidiff) are not installed "
          "(apt-get install abigail-tools)")
  return()
endif()
if(DEFINED CONFIG AND NOT CONFIG MATCHES "^(Debug|RelWithDebInfo)$")
  message("abi: SKIPPED: the ${CONFIG} build has no debug information, "
          "which abidw needs for the types")
  return()
endif()

# Without locations or build paths, so the file only changes with the ABI.
set(_flags --no-corpus-path --no-comp-dir-path --no-show-locs
    --no-elf-needed --type-id-style hash
    --headers-dir "${HEADERS}" --drop-private-types)

file(MAKE_DIRECTORY "${WORK_DIR}")
set(_current "${WORK_DIR}/redturn.abi")
if(UPDATE)
  set(_current "${BASELINE}")
endif()
execute_process(COMMAND "${ABIDW}" ${_flags} --out-file "${_current}" "${LIB}"
  RESULT_VARIABLE _rc ERROR_VARIABLE _err)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "abi: abidw ${LIB} failed (${_rc}): ${_err}")
endif()
# Translation units by file name only: no machine paths in the baseline.
file(READ "${_current}" _xml)
string(REGEX REPLACE "path='[^']*/([^/']*)'" "path='\\1'" _xml "${_xml}")
file(WRITE "${_current}" "${_xml}")
if(UPDATE)
  message(STATUS "abi: wrote the baseline ${BASELINE}")
  return()
endif()

function(_soname xml out)
  file(STRINGS "${xml}" _line LIMIT_COUNT 1 REGEX "<abi-corpus ")
  if(_line MATCHES "soname='([^']*)'")
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
  else()
    set(${out} "?" PARENT_SCOPE)
  endif()
endfunction()
_soname("${BASELINE}" _base_soname)
_soname("${_current}" _cur_soname)

execute_process(COMMAND "${ABIDIFF}" "${BASELINE}" "${_current}"
  RESULT_VARIABLE _all OUTPUT_VARIABLE _report ERROR_VARIABLE _report)
if(_all EQUAL 0)
  message(STATUS "abi: no change since the baseline (${_base_soname})")
  return()
endif()
if(NOT _all MATCHES "^[0-9]+$" OR _all EQUAL 1 OR _all EQUAL 2 OR
   _all EQUAL 3)
  message(FATAL_ERROR "abi: abidiff failed (${_all}):\n${_report}")
endif()
execute_process(COMMAND "${ABIDIFF}" --no-added-syms "${BASELINE}" "${_current}"
  RESULT_VARIABLE _changed OUTPUT_QUIET ERROR_QUIET)
message("${_report}")
if(_changed EQUAL 0)
  message(STATUS "abi: only additions since the baseline: compatible")
elseif(NOT _cur_soname STREQUAL _base_soname)
  message(STATUS "abi: incompatible changes since the baseline "
          "(${_base_soname}), and the SONAME changed to ${_cur_soname}: "
          "fine; refresh abi/redturn.abi when releasing")
else()
  message(FATAL_ERROR "abi: FAILED: incompatible changes since the baseline, "
          "but the SONAME is still ${_cur_soname}: bump RT_VERSION_MINOR "
          "(see abi/README.md)")
endif()
