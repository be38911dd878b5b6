# admit::redis — the Redis client (pipelined Asio connection on hiredis's protocol code) and Lua script support.
# Included from the top-level CMakeLists.txt after the admit::asio target is defined:
#   include(cmake/redis.cmake)
# Built when ADMIT_WITH_REDIS is ON (default: hiredis found by pkg-config and ADMIT_WITH_ASIO ON); needs OpenSSL.
#
# A compiled static library (src/redis/{client,limiter,semaphore}/*.cpp) rather than header-only: hiredis's C headers and macros (REDIS_OK,
# REDIS_REPLY_*, redisReader) stay out of users' translation units, the connection's state machine is compiled once,
# and only the thin completion-token layer (async_execute, async_evalsha) is templated in the headers.
find_package(PkgConfig QUIET)
set(admit_hiredis_found OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(HIREDIS QUIET IMPORTED_TARGET hiredis)
  if(HIREDIS_FOUND)
    set(admit_hiredis_found ON)
  endif()
endif()
set(admit_redis_default OFF)
find_package(OpenSSL 1.1.1 QUIET)
if(admit_hiredis_found AND OpenSSL_FOUND AND ADMIT_WITH_ASIO)
  set(admit_redis_default ON)
endif()
admit_auto_option(ADMIT_WITH_REDIS
  "Build the admit::redis target (needs hiredis through pkg-config, OpenSSL and ADMIT_WITH_ASIO)" ${admit_redis_default})

if(ADMIT_WITH_REDIS)
  if(NOT ADMIT_WITH_ASIO)
    message(FATAL_ERROR "ADMIT_WITH_REDIS needs ADMIT_WITH_ASIO=ON")
  endif()
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
  # rediss:// connections: Asio's SSL stream on OpenSSL (Debian: libssl-dev).
  find_package(OpenSSL 1.1.1 REQUIRED)
  # Lua scripts: each src/redis/lua/<name>.lua (or the parts in the folder <name>/, below) becomes, at build time, a
  # generated header <admit_redis_lua/<name>_lua.hpp> with `admit::redis::detail::lua::<name>` (a std::string_view of
  # src/redis/lua/common.lua's bytes followed by the file's: the calling convention and helpers every limiter script
  # shares; the semaphore's script alone) for the library's own sources.
  # Editing a .lua file regenerates its header and rebuilds what includes it; no external tool is involved.
  set(admit_redis_lua_prelude ${PROJECT_SOURCE_DIR}/src/redis/lua/common.lua)
  file(GLOB admit_redis_lua_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/redis/lua/*.lua)
  list(REMOVE_ITEM admit_redis_lua_sources ${admit_redis_lua_prelude})
  set(admit_redis_lua_dir ${PROJECT_BINARY_DIR}/generated/redis)
  set(admit_redis_lua_headers)
  set(admit_redis_lua_scripts)
  foreach(lua IN LISTS admit_redis_lua_sources)
    get_filename_component(name ${lua} NAME_WE)
    set(admit_redis_lua_parts_${name} ${lua})
    list(APPEND admit_redis_lua_scripts ${name})
  endforeach()
  # The semaphore's script is long: a folder of parts, joined in this order (core.lua states the protocol). Debug
  # builds add debug_clock.lua: a time a test can set (see that file); release builds never have it.
  # Follows the build type at every configure (not an option a cache could keep across a change of build type).
  set(admit_redis_semaphore_parts core queue classes operations call)
  if(CMAKE_BUILD_TYPE STREQUAL "Debug")
    set(admit_redis_semaphore_parts core queue classes operations debug_clock call)
  endif()
  set(admit_redis_lua_parts_semaphore)
  foreach(part IN LISTS admit_redis_semaphore_parts)
    list(APPEND admit_redis_lua_parts_semaphore ${PROJECT_SOURCE_DIR}/src/redis/lua/semaphore/${part}.lua)
  endforeach()
  list(APPEND admit_redis_lua_scripts semaphore)
  # Scripts that are not limiter scripts take no prelude.
  set(admit_redis_lua_standalone semaphore)
  foreach(name IN LISTS admit_redis_lua_scripts)
    set(header ${admit_redis_lua_dir}/admit_redis_lua/${name}_lua.hpp)
    set(prelude -DPRELUDE=${admit_redis_lua_prelude})
    if(name IN_LIST admit_redis_lua_standalone)
      set(prelude)
    endif()
    list(JOIN admit_redis_lua_parts_${name} "|" inputs)
    add_custom_command(OUTPUT ${header}
      COMMAND ${CMAKE_COMMAND} -DINPUT=${inputs} -DOUTPUT=${header} -DNAME=${name} ${prelude}
              -P ${PROJECT_SOURCE_DIR}/src/redis/lua/embed.cmake
      DEPENDS ${admit_redis_lua_parts_${name}} ${admit_redis_lua_prelude} ${PROJECT_SOURCE_DIR}/src/redis/lua/embed.cmake
      COMMENT "Embedding the Lua script ${name}"
      VERBATIM)
    list(APPEND admit_redis_lua_headers ${header})
  endforeach()

  # One folder per room: client/ (knows nothing of limits), limiter/ (the rate limiters' core and algorithms),
  # semaphore/ (the distributed semaphore). What the last two share is in src/redis/: hash_tag.hpp, and functions.cpp
  # (their Lua code as one function library).
  file(GLOB admit_redis_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/redis/*.cpp ${PROJECT_SOURCE_DIR}/src/redis/client/*.cpp
    ${PROJECT_SOURCE_DIR}/src/redis/limiter/*.cpp ${PROJECT_SOURCE_DIR}/src/redis/semaphore/*.cpp)
  add_library(admit_redis STATIC
    ${admit_redis_sources}
    ${admit_redis_lua_headers})
  add_library(admit::redis ALIAS admit_redis)
  admit_unity_build(admit_redis)
  set_target_properties(admit_redis PROPERTIES EXPORT_NAME redis POSITION_INDEPENDENT_CODE ON)
  target_include_directories(admit_redis PRIVATE $<BUILD_INTERFACE:${admit_redis_lua_dir}>
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src/redis>)
  # admit_warnings only while building admit (it is not exported); hiredis is a private dependency of the static
  # library, recreated by admit-config.cmake for consumers of the installed package.
  target_link_libraries(admit_redis PUBLIC admit_asio PRIVATE PkgConfig::HIREDIS OpenSSL::SSL OpenSSL::Crypto
    $<BUILD_INTERFACE:admit_warnings>)
  if(ADMIT_BUILD_TESTS)
    add_subdirectory(${PROJECT_SOURCE_DIR}/tests/redis ${PROJECT_BINARY_DIR}/tests/redis)
  endif()
endif()
