# Turns one Lua script into a C++ header holding it as a string constant (run at build time, no external tools):
#   cmake -DINPUT=<dir>/gcra.lua -DOUTPUT=<dir>/gcra_lua.hpp -DNAME=gcra [-DPRELUDE=<dir>/common.lua] -P embed.cmake
# gives `inline constexpr std::string_view admit::redis::detail::lua::gcra` with the bytes of PRELUDE (if given)
# followed by the file's, but for their whole-line comments, each left as an empty line (Lua's errors still name the
# line of the file): the script EVALSHA runs is exactly that text (its SHA1 is the SHA1 of those bytes). The comments
# are for whoever reads the files; Redis would only parse them, and with them the semaphore's script is longer than
# the 65,536 bytes a C++ compiler must accept in one string literal (clang refuses it under -Wpedantic).
# A script in parts: INPUT lists them separated by '|' (a list's ';' would split the command line), joined in order.
# The header is rewritten only when its content changes.
foreach(var INPUT OUTPUT NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT NAME MATCHES "^[a-z_][a-z0-9_]*$")
  message(FATAL_ERROR "embed.cmake: NAME '${NAME}' is not a C++ identifier in snake_case")
endif()
string(REPLACE "|" ";" inputs "${INPUT}")
set(source "")
foreach(input IN LISTS inputs)
  file(READ "${input}" part)
  string(APPEND source "${part}")
endforeach()
if(DEFINED PRELUDE)
  file(READ "${PRELUDE}" prelude)
  string(PREPEND source "${prelude}")
endif()
# (A line whose first characters but blanks are "--" is a comment: the scripts have no multi-line strings.)
string(PREPEND source "\n")
string(REGEX REPLACE "\n[ \t]*--[^\n]*" "\n" source "${source}")
string(SUBSTRING "${source}" 1 -1 source)
string(FIND "${source}" ")admit_lua\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "embed.cmake: ${INPUT} (or its prelude) contains the raw string delimiter )admit_lua\"")
endif()
string(CONCAT content
  "// Generated from ${INPUT} by src/redis/lua/embed.cmake: do not edit.\n"
  "#pragma once\n\n"
  "#include <string_view>\n\n"
  "namespace admit::redis::detail::lua {\n"
  "inline constexpr std::string_view ${NAME} = R\"admit_lua(${source})admit_lua\";\n"
  "}  // namespace admit::redis::detail::lua\n")
file(WRITE "${OUTPUT}.tmp" "${content}")
configure_file("${OUTPUT}.tmp" "${OUTPUT}" COPYONLY)
file(REMOVE "${OUTPUT}.tmp")
