# Turns one Lua script into a C++ header holding it as a string constant (run at build time, no external tools):
#   cmake -DINPUT=<dir>/gcra.lua -DOUTPUT=<dir>/gcra_lua.hpp -DNAME=gcra -P embed.cmake
# gives `inline constexpr std::string_view admit::redis::detail::lua::gcra` with the file's bytes, verbatim (so the
# SHA1 that EVALSHA uses is the SHA1 of the .lua file). The header is rewritten only when its content changes.
foreach(var INPUT OUTPUT NAME)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "embed.cmake: -D${var}=... is required")
  endif()
endforeach()
if(NOT NAME MATCHES "^[a-z_][a-z0-9_]*$")
  message(FATAL_ERROR "embed.cmake: NAME '${NAME}' is not a C++ identifier in snake_case")
endif()
file(READ "${INPUT}" source)
string(FIND "${source}" ")admit_lua\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "embed.cmake: ${INPUT} contains the raw string delimiter )admit_lua\"")
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
