# The test programs' common setup: admit_add_test() and the precompiled headers they share. Included from the
# top-level CMakeLists.txt when ADMIT_BUILD_TESTS is ON, before tests/ and tests/redis/ use it.
find_package(GTest REQUIRED)
include(GoogleTest)

# admit_add_test(<source> [PCH <owner>] [TIMEOUT <seconds>] [LABEL <label>] [LIBRARIES <targets>...])
# One test program per source file, named after it. A test whose source starts threads (std::thread, std::jthread,
# std::async, or the Redis tests' io_thread) is labelled `threads` (unless it has a LABEL, as the Redis tests' `redis`),
# the others `unit`: the ThreadSanitizer preset builds only the tests that start threads and runs the labels `threads`
# and `redis`. Every test has a timeout (default 300 s), so a hang fails in minutes. The programs reuse one precompiled
# header per kind (admit_test_pch by default; admit_add_test_pch makes others), parsed once per build instead of once
# per program.
function(admit_add_test source)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "PCH;TIMEOUT;LABEL" "LIBRARIES")
  if(NOT T_PCH)
    set(T_PCH admit_test_pch)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  get_filename_component(name ${source} NAME_WE)
  file(STRINGS ${source} thread_lines REGEX "std::(j?thread|async)|io_thread")
  if(NOT thread_lines AND ADMIT_THREADED_TESTS_ONLY)
    return()
  endif()
  # One label a test: gtest_discover_tests cannot pass a list of labels through (the second becomes a property name).
  if(NOT T_LABEL AND thread_lines)
    set(T_LABEL threads)
  elseif(NOT T_LABEL)
    set(T_LABEL unit)
  endif()
  add_executable(${name} ${source})
  target_link_libraries(${name} PRIVATE admit::admit admit::testing admit_warnings GTest::gtest GTest::gtest_main
    ${T_LIBRARIES})
  target_compile_options(${name} PRIVATE ${admit_test_pch_options})
  target_precompile_headers(${name} REUSE_FROM ${T_PCH})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS ${T_LABEL})
endfunction()

# -fpch-preprocess lets ccache cache GCC's compiles that use a precompiled header; it changes nothing else.
set(admit_test_pch_options $<$<CXX_COMPILER_ID:GNU>:-fpch-preprocess>)
# admit_add_test_pch(<owner> <header> <libraries>...): an object library that owns a precompiled header for tests
# linking <libraries>. Its compile options must be those of the tests that reuse it (GCC refuses a header compiled
# with other definitions), so each kind of test has its own: hiredis's pkg-config flags define _FILE_OFFSET_BITS, say.
function(admit_add_test_pch owner header)
  set(source ${PROJECT_BINARY_DIR}/tests/${owner}.cpp)
  file(GENERATE OUTPUT ${source} CONTENT "// owns a precompiled header of the tests\n")
  add_library(${owner} OBJECT ${source})
  target_link_libraries(${owner} PRIVATE admit::admit admit::testing admit_warnings GTest::gtest ${ARGN})
  target_compile_options(${owner} PRIVATE ${admit_test_pch_options})
  target_precompile_headers(${owner} PRIVATE ${header})
endfunction()

admit_add_test_pch(admit_test_pch ${PROJECT_SOURCE_DIR}/tests/support/test_pch.hpp)
if(TARGET admit::asio)
  # The Asio layer's tests drive timers with the manual clock, which needs the select reactor (they say why): the
  # definition must be seen before the precompiled Asio headers, so it is the owner's and each such test's.
  admit_add_test_pch(admit_test_asio_pch ${PROJECT_SOURCE_DIR}/tests/support/test_asio_pch.hpp admit::asio)
  target_compile_definitions(admit_test_asio_pch PRIVATE BOOST_ASIO_DISABLE_EPOLL=1)
endif()
