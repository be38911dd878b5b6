# The test programs' common setup: admit_add_tests() and the precompiled headers they share. Included from the
# top-level CMakeLists.txt when ADMIT_BUILD_TESTS is ON, before tests/ and tests/redis/ use it.
find_package(GTest REQUIRED)
include(GoogleTest)

# admit_add_tests(<name> SOURCES <sources>... [PCH <owner>] [TIMEOUT <seconds>] [LABEL <label>]
#                 [LIBRARIES <targets>...])
# One test program for a folder of tests/ rather than one per source file: a debug program linking gRPC or Asio takes
# seconds to link, and the tests of a folder share their headers. ctest still runs each test case as its own process
# (gtest_discover_tests), so a test sees no state another one left.
#
# A source that starts threads (std::thread, std::jthread, std::async, or the Redis tests' io_thread) goes into
# <name>_threads, labelled `threads`, the others into <name>, labelled `unit` — unless the folder has a LABEL (the
# Redis tests' `redis`), which takes all its sources into <name>. The ThreadSanitizer preset builds only the sources
# that start threads and runs the labels `threads` and `redis`. Every test has a timeout (default 300 s), so a hang
# fails in minutes. The programs reuse one precompiled header per kind (admit_test_pch by default;
# admit_add_test_pch makes others), parsed once per build instead of once per program.
#
# Returns, in <name>_TARGETS in the caller's scope, the programs it made (none when no source is left), for the
# caller's compile definitions and include directories.
function(admit_add_tests name)
  cmake_parse_arguments(PARSE_ARGV 1 T "" "PCH;TIMEOUT;LABEL" "SOURCES;LIBRARIES")
  if(NOT T_PCH)
    set(T_PCH admit_test_pch)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set(unit_sources)
  set(threaded_sources)
  foreach(source IN LISTS T_SOURCES)
    file(STRINGS ${source} thread_lines REGEX "std::(j?thread|async)|io_thread")
    if(thread_lines)
      list(APPEND threaded_sources ${source})
    elseif(NOT ADMIT_THREADED_TESTS_ONLY)
      list(APPEND unit_sources ${source})
    endif()
  endforeach()
  # One label a program: gtest_discover_tests cannot pass a list of labels through (the second becomes a property
  # name).
  if(T_LABEL)
    set(programs ${name})
    set(${name}_sources ${unit_sources} ${threaded_sources})
    set(${name}_label ${T_LABEL})
  else()
    set(programs ${name} ${name}_threads)
    set(${name}_sources ${unit_sources})
    set(${name}_label unit)
    set(${name}_threads_sources ${threaded_sources})
    set(${name}_threads_label threads)
  endif()
  set(made)
  foreach(program IN LISTS programs)
    if(NOT ${program}_sources)
      continue()
    endif()
    # A program with a test that counts allocations gets the replacement operator new that counts them.
    set(extra)
    foreach(source IN LISTS ${program}_sources)
      file(STRINGS ${source} counts REGEX "#include \"support/count_allocations.hpp\"")
      if(counts)
        set(extra ${PROJECT_SOURCE_DIR}/tests/support/count_allocations.cpp)
      endif()
    endforeach()
    add_executable(${program} ${${program}_sources} ${extra})
    target_link_libraries(${program} PRIVATE admit::admit admit::testing admit_warnings GTest::gtest GTest::gtest_main
      ${T_LIBRARIES})
    target_compile_options(${program} PRIVATE ${admit_test_pch_options})
    target_precompile_headers(${program} REUSE_FROM ${T_PCH})
    # A few sources to a translation unit (ADMIT_UNITY_TESTS). The tests of a folder instantiate the same templates
    # (Asio's operations, gtest's, the limiters', the Redis client's), which a build otherwise compiles once per source
    # (four Redis limiter tests, debug: 10 s of compiler time instead of 23). Sources of a batch share one scope: a test
    # file whose helpers would collide with another's keeps its names in a namespace named after the file.
    # GCC's -Wsubobject-linkage takes every source of a batch for a header (it is #included), and so flags a test's
    # local types in the coroutine frames of Asio's templates: one definition per program, which is all a test has.
    if(ADMIT_UNITY_TESTS)
      set_target_properties(${program} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${ADMIT_UNITY_TESTS_BATCH})
      target_compile_options(${program} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
    endif()
    # GCC 12 at -O3 warns about libstdc++'s own std::string code (array-bounds, stringop-overflow, restrict) once a
    # test's short strings are inlined into it (a string built with operator+, a literal assigned): false positives
    # that depend on what else a translation unit holds. The release build's tests only; the library is still checked.
    target_compile_options(${program} PRIVATE
      $<$<AND:$<CXX_COMPILER_ID:GNU>,$<CONFIG:Release>>:-Wno-array-bounds -Wno-stringop-overflow -Wno-restrict>)
    gtest_discover_tests(${program} DISCOVERY_TIMEOUT 60 PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS ${${program}_label})
    list(APPEND made ${program})
  endforeach()
  set(${name}_TARGETS ${made} PARENT_SCOPE)
endfunction()

option(ADMIT_UNITY_TESTS "Compile the test programs' sources a few to a translation unit (faster from scratch)" ON)
set(ADMIT_UNITY_TESTS_BATCH 6 CACHE STRING "Sources per translation unit of a test program (ADMIT_UNITY_TESTS)")

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
