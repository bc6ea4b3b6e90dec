# The "install" CTest test, run as
#   cmake -DBUILD_DIR=... -DCONSUMER_DIR=... -DWORK_DIR=... -DCONFIG=...
#         -DGENERATOR=... -DC_COMPILER=... -DLIBDIR=... -DPKG_CONFIG=...
#         -DVERSION=... -P RunInstallTest.cmake
# Installs the build into WORK_DIR/prefix, then builds and runs the consumer
# in CONSUMER_DIR against it: with find_package(redturn) (shared and static
# targets) and with the flags pkg-config gives for redturn.pc. Any failing
# step stops the test with its output.

cmake_minimum_required(VERSION 3.16)

foreach(_v BUILD_DIR CONSUMER_DIR WORK_DIR C_COMPILER LIBDIR PKG_CONFIG VERSION)
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
    "${LIBDIR}/pkgconfig/redturn.pc"
    "${LIBDIR}/cmake/redturn/redturnConfig.cmake"
    "${LIBDIR}/cmake/redturn/redturnConfigVersion.cmake"
    "${LIBDIR}/cmake/redturn/redturnTargets.cmake"
    "${LIBDIR}/libredturn.a"
    "${LIBDIR}/libredturn.so")
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
foreach(_lib -lredturn -luv -lhiredis -luuid)
  if(NOT rt_step_output MATCHES "(^| )${_lib}( |$|\n)")
    message(FATAL_ERROR
      "install test: FAILED: ${_lib} missing from `pkg-config --static --libs redturn`: ${rt_step_output}")
  endif()
endforeach()

rt_step("pkg-config --cflags --libs redturn" "${PKG_CONFIG}" --cflags --libs redturn)
string(STRIP "${rt_step_output}" _flags)
separate_arguments(_flags UNIX_COMMAND "${_flags}")

set(_pc_exe "${WORK_DIR}/check_pkgconfig")
rt_step("cc main.c $(pkg-config --cflags --libs redturn)"
  "${C_COMPILER}" "${CONSUMER_DIR}/main.c" -o "${_pc_exe}" ${_flags})

set(ENV{LD_LIBRARY_PATH} "${_libdir}")
rt_step("run check_pkgconfig" "${_pc_exe}")
message(STATUS "  ${rt_step_output}")

message(STATUS "install test: passed")
