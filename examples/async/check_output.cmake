# Runs PROGRAM and compares its standard output with the file EXPECTED: the ctest check of the examples that
# docs/async.md quotes.
execute_process(COMMAND ${PROGRAM} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${PROGRAM} exited with ${rc}\n${out}${err}")
endif()
file(READ ${EXPECTED} expected)
if(NOT out STREQUAL expected)
  message(FATAL_ERROR "${PROGRAM}: the output differs from ${EXPECTED}\n--- got:\n${out}--- expected:\n${expected}")
endif()
