# The "install" CTest test, run as
#   cmake -DBUILD_DIR=... -DCONSUMER_DIR=... -DWORK_DIR=... -DCONFIG=...
#         -DGENERATOR=... -DC_COMPILER=... -DLIBDIR=... -DPKG_CONFIG=...
#         -DVERSION=... -DSOVERSION=... -P RunInstallTest.cmake
# Installs the build into WORK_DIR/prefix, then builds and runs the consumer
# in CONSUMER_DIR against it: with find_package(redturn) (shared and static
# targets), with the flags pkg-config gives for redturn.pc (shared) and
# redturn-static.pc (static: the program runs without libredturn.so in
# reach), and compiles the public header as a strict C11 user would
# (-std=c11 -pedantic -Werror, with pkg-config's Cflags, which must not
# name hiredis), and checks that a part of the header (redturn/)
# included alone is refused. With -DMODULE=ON it starts a redis-server
# (from PATH) with --loadmodule of the installed redturn_module.so and asks
# it redturn.version. Any failing step stops the test with its output.

cmake_minimum_required(VERSION 3.16)

foreach(_v BUILD_DIR CONSUMER_DIR WORK_DIR C_COMPILER LIBDIR PKG_CONFIG VERSION
           SOVERSION)
  if(NOT DEFINED ${_v} OR "${${_v}}" STREQUAL "")
    message(FATAL_ERROR "RunInstallTest.cmake: ${_v} is not set")
  endif()
endforeach()

set(_prefix "${WORK_DIR}/prefix")
set(_consumer_build "${WORK_DIR}/consumer")
set(_libdir "${_prefix}/${LIBDIR}")

# Run a command; on failure print what it said and stop.
function(rt_step what)
  message(STATUS "install test: ${what}")
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE _rc
    OUTPUT_VARIABLE _out
    ERROR_VARIABLE _out)
  if(NOT _rc EQUAL 0)
    message("${_out}")
    message(FATAL_ERROR "install test: FAILED: ${what} (exit ${_rc})")
  endif()
  set(rt_step_output "${_out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

set(_config_args "")
if(CONFIG)
  set(_config_args --config "${CONFIG}")
endif()

rt_step("install the build into ${_prefix}"
  "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${_prefix}" ${_config_args})

foreach(_f
    "include/redturn.h"
    "include/redturn/options.h"
    "include/redturn/blocking.h"
    "${LIBDIR}/pkgconfig/redturn.pc"
    "${LIBDIR}/cmake/redturn/redturnConfig.cmake"
    "${LIBDIR}/cmake/redturn/redturnConfigVersion.cmake"
    "${LIBDIR}/cmake/redturn/redturnTargets.cmake"
    "${LIBDIR}/pkgconfig/redturn-static.pc"
    "${LIBDIR}/libredturn.a"
    "${LIBDIR}/libredturn.so"
    "${LIBDIR}/libredturn.so.${SOVERSION}")
  if(NOT EXISTS "${_prefix}/${_f}")
    message(FATAL_ERROR "install test: FAILED: ${_f} was not installed")
  endif()
endforeach()

# ---- find_package(redturn) --------------------------------------------------

set(_gen_args "")
if(GENERATOR)
  set(_gen_args -G "${GENERATOR}")
endif()
set(_type_args "")
if(CONFIG)
  set(_type_args "-DCMAKE_BUILD_TYPE=${CONFIG}")
endif()

rt_step("configure the consumer with CMAKE_PREFIX_PATH"
  "${CMAKE_COMMAND}" -S "${CONSUMER_DIR}" -B "${_consumer_build}" ${_gen_args}
  "-DCMAKE_PREFIX_PATH=${_prefix}"
  "-DCMAKE_C_COMPILER=${C_COMPILER}"
  ${_type_args})
rt_step("build the consumer"
  "${CMAKE_COMMAND}" --build "${_consumer_build}" ${_config_args})

foreach(_exe check_shared check_static)
  # Single-config generators put it at the top, multi-config ones under
  # the configuration's directory.
  set(_path "${_consumer_build}/${_exe}")
  if(NOT EXISTS "${_path}" AND CONFIG)
    set(_path "${_consumer_build}/${CONFIG}/${_exe}")
  endif()
  if(NOT EXISTS "${_path}")
    message(FATAL_ERROR "install test: FAILED: ${_exe} was not built")
  endif()
  rt_step("run ${_exe}" "${_path}")
  message(STATUS "  ${rt_step_output}")
endforeach()

# ---- pkg-config ---------------------------------------------------------------

set(ENV{PKG_CONFIG_PATH} "${_libdir}/pkgconfig")

rt_step("pkg-config --modversion redturn" "${PKG_CONFIG}" --modversion redturn)
string(STRIP "${rt_step_output}" _pc_version)
if(NOT _pc_version STREQUAL VERSION)
  message(FATAL_ERROR
    "install test: FAILED: redturn.pc says ${_pc_version}, the build is ${VERSION}")
endif()

rt_step("pkg-config --static --libs redturn" "${PKG_CONFIG}" --static --libs redturn)
foreach(_lib -lredturn -luv -lhiredis)
  if(NOT rt_step_output MATCHES "(^| )${_lib}( |$|\n)")
    message(FATAL_ERROR
      "install test: FAILED: ${_lib} missing from `pkg-config --static --libs redturn`: ${rt_step_output}")
  endif()
endforeach()
# The client id's random bytes come from getentropy, not libuuid.
if(rt_step_output MATCHES "-luuid")
  message(FATAL_ERROR
    "install test: FAILED: `pkg-config --static --libs redturn` names libuuid: ${rt_step_output}")
endif()

rt_step("pkg-config --cflags --libs redturn" "${PKG_CONFIG}" --cflags --libs redturn)
string(STRIP "${rt_step_output}" _flags)
separate_arguments(_flags UNIX_COMMAND "${_flags}")

set(_pc_exe "${WORK_DIR}/check_pkgconfig")
rt_step("cc main.c $(pkg-config --cflags --libs redturn)"
  "${C_COMPILER}" "${CONSUMER_DIR}/main.c" -o "${_pc_exe}" ${_flags})

set(ENV{LD_LIBRARY_PATH} "${_libdir}")
rt_step("run check_pkgconfig" "${_pc_exe}")
message(STATUS "  ${rt_step_output}")

# The static library through redturn-static.pc: the program must run with
# no libredturn.so in reach.
rt_step("pkg-config --cflags --libs redturn-static"
  "${PKG_CONFIG}" --cflags --libs redturn-static)
string(STRIP "${rt_step_output}" _sflags)
separate_arguments(_sflags UNIX_COMMAND "${_sflags}")
set(_pcs_exe "${WORK_DIR}/check_pkgconfig_static")
rt_step("cc main.c $(pkg-config --cflags --libs redturn-static)"
  "${C_COMPILER}" "${CONSUMER_DIR}/main.c" -o "${_pcs_exe}" ${_sflags})
unset(ENV{LD_LIBRARY_PATH})
rt_step("run check_pkgconfig_static (without LD_LIBRARY_PATH)" "${_pcs_exe}")
message(STATUS "  ${rt_step_output}")

# Users' compiles see only redturn's and libuv's headers.
rt_step("pkg-config --cflags redturn" "${PKG_CONFIG}" --cflags redturn)
string(STRIP "${rt_step_output}" _cflags)
if(_cflags MATCHES "hiredis")
  message(FATAL_ERROR
    "install test: FAILED: `pkg-config --cflags redturn` leaks private include paths: ${_cflags}")
endif()
separate_arguments(_cflags UNIX_COMMAND "${_cflags}")

# The header in strict ISO C, first in the file, and after a system header
# with _POSIX_C_SOURCE (the header cannot fix that case: it says so).
set(_strict -std=c11 -pedantic -Werror -Wall -Wextra)
rt_step("cc -std=c11 -pedantic -Werror strict.c"
  "${C_COMPILER}" ${_strict} ${_cflags} -c "${CONSUMER_DIR}/strict.c"
  -o "${WORK_DIR}/strict.o")
rt_step("cc -std=c11 -pedantic -Werror -D_POSIX_C_SOURCE=200809L -DSYSTEM_HEADER_FIRST strict.c"
  "${C_COMPILER}" ${_strict} -D_POSIX_C_SOURCE=200809L -DSYSTEM_HEADER_FIRST
  ${_cflags} -c "${CONSUMER_DIR}/strict.c" -o "${WORK_DIR}/strict2.o")
execute_process(COMMAND "${C_COMPILER}" ${_strict} -DSYSTEM_HEADER_FIRST
  ${_cflags} -c "${CONSUMER_DIR}/strict.c" -o "${WORK_DIR}/strict3.o"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(_rc EQUAL 0 OR NOT _out MATCHES "redturn.h \\(uv.h\\) needs POSIX")
  message("${_out}")
  message(FATAL_ERROR "install test: FAILED: a strict compile with a system "
          "header first should stop at redturn.h's #error")
endif()

# A part of the header alone is refused, naming the header to include.
file(WRITE "${WORK_DIR}/part_alone.c" "#include <redturn/blocking.h>\n")
execute_process(COMMAND "${C_COMPILER}" ${_strict} ${_cflags}
  -c "${WORK_DIR}/part_alone.c" -o "${WORK_DIR}/part_alone.o"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(_rc EQUAL 0 OR NOT _out MATCHES "include redturn.h, not redturn/blocking.h")
  message("${_out}")
  message(FATAL_ERROR "install test: FAILED: including redturn/blocking.h "
          "alone should stop at its #error")
endif()

# The installed module loads into redis-server as the README says.
if(MODULE)
  set(_so "${_libdir}/redturn/redturn_module.so")
  if(NOT EXISTS "${_so}")
    message(FATAL_ERROR "install test: FAILED: ${_so} was not installed")
  endif()
  find_program(_server redis-server)
  find_program(_cli redis-cli)
  if(NOT _server OR NOT _cli)
    message(FATAL_ERROR "install test: FAILED: redis-server and redis-cli are "
            "needed to load the installed module")
  endif()
  # The contract version the module must answer: protocol/constants.txt's.
  file(STRINGS "${CONSUMER_DIR}/../../protocol/constants.txt" _mv
       REGEX "^MODULE_VERSION[ \t]+[0-9]+")
  string(REGEX REPLACE "^MODULE_VERSION[ \t]+([0-9]+).*" "\\1" _mv "${_mv}")
  rt_step("redis-server --loadmodule ${_so}"
    sh "${CONSUMER_DIR}/load_module.sh" "${_server}" "${_cli}" "${_so}"
    "${WORK_DIR}/server" "${_mv}")
  message(STATUS "  ${rt_step_output}")
endif()

message(STATUS "install test: passed")
