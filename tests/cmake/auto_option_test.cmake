# cmake -DAUTO_OPTION=<cmake/auto_option.cmake> -DWORK=<scratch dir> [-DGENERATOR=<the build's> -DMAKE_PROGRAM=<its
#   program>] -P auto_option_test.cmake
#
# admit_auto_option (cmake/auto_option.cmake) in a project of its own, configured again and again in one build
# directory as a user would: an option nobody set follows what is found at every configure (the first configure
# before the dependencies were installed does not keep the part off), and one set with -D stays as set.
cmake_minimum_required(VERSION 3.25)

set(source "${WORK}/source")
set(binary "${WORK}/binary")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${source}")
# FOUND stands for the dependencies: whether they are found at this configure; OLD makes PART by option(), as before
# admit_auto_option.
file(WRITE "${source}/CMakeLists.txt" "cmake_minimum_required(VERSION 3.25)
project(auto_option_probe LANGUAGES NONE)
include([[${AUTO_OPTION}]])
if(OLD)
  option(PART \"Build the part\" \"\${FOUND}\")
else()
  admit_auto_option(PART \"Build the part\" \"\${FOUND}\")
endif()
")
set(generator)
if(GENERATOR)
  set(generator -G "${GENERATOR}")
  if(MAKE_PROGRAM)
    list(APPEND generator "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
  endif()
endif()

# Configures with `args`; `expected` is PART's value after it, `said` what the configure's output must contain
# ("" for nothing in particular).
function(configure expected said)
  execute_process(COMMAND "${CMAKE_COMMAND}" -S "${source}" -B "${binary}" ${generator} ${ARGN}
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "configure ${ARGN} failed (${rc}):\n${out}${err}")
  endif()
  file(STRINGS "${binary}/CMakeCache.txt" line REGEX "^PART:")
  if(NOT line STREQUAL "PART:BOOL=${expected}")
    message(FATAL_ERROR "after configure ${ARGN}: ${line}, expected PART:BOOL=${expected}\n${out}")
  endif()
  if(said AND NOT out MATCHES "${said}")
    message(FATAL_ERROR "configure ${ARGN} did not say \"${said}\":\n${out}")
  endif()
endfunction()

configure(OFF "" -DFOUND=OFF)  # configured before the dependencies were installed
configure(ON "PART is ON now that its dependencies are found" -DFOUND=ON)  # installed since
configure(ON "" -DFOUND=ON)
configure(OFF "PART is OFF now" -DFOUND=OFF)  # gone again: as a fresh build directory would
configure(ON "" -DFOUND=ON)
configure(OFF "" -DFOUND=ON -DPART=OFF)  # set by hand: kept
configure(OFF "" -DFOUND=ON)
configure(ON "" -DFOUND=OFF -DPART=ON)  # set by hand against what is found: kept (its own checks then fail)
configure(ON "" -DFOUND=OFF)

# A build directory that option() configured without the dependencies (an admit from before): found since, it is on.
file(REMOVE_RECURSE "${binary}")
configure(OFF "" -DOLD=ON -DFOUND=OFF)
configure(ON "PART is ON now that its dependencies are found" -UOLD -DFOUND=ON)
file(REMOVE_RECURSE "${WORK}")
