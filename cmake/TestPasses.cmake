# The passes of the test suite (docs/CONTRIBUTING.md, "Build and test").
#
# A test of the plain tree runs once as added (the default pass: the
# Functions library, or the module where a test loads it). A test whose
# outcome depends on how the scripts are run runs again in other passes,
# each a test of its own named <test>@<pass> and labelled with its pass:
#
#   eval              every test client forced to EVALSHA
#   module            every redis-server a test starts loads the build's
#                     redturn module, every test client forced to it
#   <server>          compatibility: the redis-server, redis-cli and
#                     redis-sentinel of <server> first in PATH
#   <server>+module   both
#
# <server> comes from REDTURN_COMPAT_SERVERS, a list of <name>=<bin dir>
# (scripts/test.sh fills it from scripts/servers.sh). The ASan tree has
# one pass, asan: its tests are named <test>@asan.
#
# Labels say which pass runs what, never names: unit, integration
# (against servers), fault (the fault suite's runs), checker (its
# selftests), install, bench, model; and the pass: default (the plain
# tree's own), eval, module, compat with <server> or <server>+module, asan
# (every test of the ASan tree). A test
# labelled path_independent (it calls the scripts or the module itself,
# or chooses its paths itself) runs once per server, not per path.

# What a test weighs on the machine, in slots of the resource "load" that
# scripts/test.sh offers ctest (--resource-spec-file): 8 slots per core,
# by the test's first label, twice as much in the ASan tree. The model
# checker keeps a core busy; the fault suite's runs and the integration
# tests mostly wait for their servers and timers (about a tenth and a
# fifth of a core, measured with time(1) over a whole pass), but a fault
# run's tolerances want the scheduler's attention when it wakes.
set(_rt_weight_unit 1)
set(_rt_weight_checker 1)
set(_rt_weight_integration 2)
set(_rt_weight_fault 2)
set(_rt_weight_asan_server 4)
set(_rt_weight_install 4)
set(_rt_weight_bench 6)
set(_rt_weight_model 8)

set(REDTURN_COMPAT_SERVERS "" CACHE STRING
  "Servers for the compatibility passes: a list of <name>=<bin dir>")
set(REDTURN_ASAN_SERVER "" CACHE PATH
  "The bin dir of an AddressSanitizer build of a server, for the module's tests")

# rt_pass_env(PASS OUT_ENV OUT_MOD): the ENVIRONMENT and
# ENVIRONMENT_MODIFICATION entries of PASS.
function(rt_pass_env pass out_env out_mod)
  set(_env)
  set(_mod)
  string(REGEX REPLACE "\\+module$" "" _server "${pass}")
  if(pass STREQUAL "eval")
    list(APPEND _env "REDTURN_TEST_SCRIPT_PATH=eval")
    set(_server "")
  elseif(pass MATCHES "module$")
    list(APPEND _env "REDTURN_TEST_MODULE=$<TARGET_FILE:redturn_module>"
      "REDTURN_TEST_SCRIPT_PATH=module")
    if(pass STREQUAL "module")
      set(_server "")
    endif()
  endif()
  if(_server)
    set(_bin "")
    foreach(_entry IN LISTS REDTURN_COMPAT_SERVERS)
      if(_entry MATCHES "^${_server}=(.*)$")
        set(_bin "${CMAKE_MATCH_1}")
      endif()
    endforeach()
    list(APPEND _mod "PATH=path_list_prepend:${_bin}")
  endif()
  set(${out_env} "${_env}" PARENT_SCOPE)
  set(${out_mod} "${_mod}" PARENT_SCOPE)
endfunction()

# The passes a test labelled integration runs in beyond the default one:
# rt_integration_passes(OUT PATH_INDEPENDENT).
function(rt_integration_passes out path_independent)
  set(_passes)
  if(NOT REDTURN_ASAN)
    if(NOT path_independent)
      list(APPEND _passes eval)
      if(TARGET redturn_module)
        list(APPEND _passes module)
      endif()
    endif()
    foreach(_entry IN LISTS REDTURN_COMPAT_SERVERS)
      string(REGEX REPLACE "=.*" "" _server "${_entry}")
      list(APPEND _passes "${_server}")
      if(TARGET redturn_module AND NOT path_independent)
        list(APPEND _passes "${_server}+module")
      endif()
    endforeach()
  endif()
  set(${out} "${_passes}" PARENT_SCOPE)
endfunction()

# rt_add_test(NAME name LABELS l... [TIMEOUT s] [PASSES p...]
#             [PROPERTIES k v...] COMMAND cmd...):
# add_test, and the same test in each pass of PASSES. In the command,
# @PASS@ becomes "" in the default pass and "@<pass>" in the others (for
# the files a test writes: passes run side by side).
function(rt_add_test)
  cmake_parse_arguments(PARSE_ARGV 0 A "" "NAME;TIMEOUT"
    "LABELS;PASSES;PROPERTIES;COMMAND")
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  list(GET A_LABELS 0 _first)
  set(_weight ${_rt_weight_${_first}})
  if(NOT _weight)
    message(FATAL_ERROR "rt_add_test(${A_NAME}): no weight for label ${_first}")
  endif()
  # The ASan tree's tests: named <test>@asan, their sanitizers' options in
  # their environment (also when run by hand).
  set(_tree_suffix "")
  set(_tree_env)
  if(REDTURN_ASAN)
    math(EXPR _weight "2 * ${_weight}")
    set(_tree_suffix "@asan")
    set(_tree_env "ASAN_OPTIONS=detect_leaks=1:abort_on_error=1"
      "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0"
      "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
  foreach(_pass "" ${A_PASSES})
    set(_name "${A_NAME}")
    set(_suffix "${_tree_suffix}")
    set(_labels ${A_LABELS})
    if(REDTURN_ASAN)
      list(APPEND _labels asan)
    elseif(NOT _pass)
      list(APPEND _labels default)
    endif()
    if(_pass)
      set(_suffix "@${_pass}")
      if(NOT _pass STREQUAL "eval" AND NOT _pass STREQUAL "module")
        list(APPEND _labels compat)
      endif()
      list(APPEND _labels "${_pass}")
    endif()
    string(REPLACE "@PASS@" "${_suffix}" _cmd "${A_COMMAND}")
    add_test(NAME "${_name}${_suffix}" COMMAND ${_cmd})
    set_tests_properties("${_name}${_suffix}" PROPERTIES
      TIMEOUT ${A_TIMEOUT} LABELS "${_labels}"
      RESOURCE_GROUPS "load:${_weight}" ${A_PROPERTIES})
    set(_env ${_tree_env})
    set(_mod)
    if(_pass)
      rt_pass_env("${_pass}" _env _mod)
    endif()
    if(_env)
      set_tests_properties("${_name}${_suffix}" PROPERTIES
        ENVIRONMENT "${_env}")
    endif()
    if(_mod)
      set_tests_properties("${_name}${_suffix}" PROPERTIES
        ENVIRONMENT_MODIFICATION "${_mod}")
    endif()
  endforeach()
endfunction()
