# Two Debian packages, made by `cmake --build --preset release --target package` in the build directory:
#   admit_<version>_<arch>.deb         the tool (/usr/bin/admit), the systemd unit admit-serve.service running
#                                      `admit serve` on /etc/admit/serve/ as the user `admit`, the example rules
#                                      (conffiles), the docs and the container and monitoring examples
#   libadmit-dev_<version>_<arch>.deb  the headers, the compiled library (libadmit_redis.a) and the CMake package
# The install components are `tool` and `dev`; an install without CPack (cmake --install) installs both under its
# prefix (the rules under <prefix>/etc/admit/serve, or /etc/admit/serve for the prefix /usr, as GNUInstallDirs does).

if(ADMIT_BUILD_TOOLS)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/admit-serve.service DESTINATION lib/systemd/system COMPONENT tool)
  file(GLOB admit_example_rules ${PROJECT_SOURCE_DIR}/examples/serve/config/*.yaml)
  set(admit_rules_quoted "")  # each path quoted: the source directory's path may hold spaces
  foreach(rule IN LISTS admit_example_rules)
    string(APPEND admit_rules_quoted " \"${rule}\"")
  endforeach()
  install(CODE "
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\")
      set(admit_rules_dir /etc/admit/serve)
    else()
      set(admit_rules_dir \"\${CMAKE_INSTALL_PREFIX}/etc/admit/serve\")
    endif()
    file(INSTALL DESTINATION \"\${admit_rules_dir}\" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
         FILES${admit_rules_quoted})
  " COMPONENT tool)
  # The README and every doc, as the repository lays them out, so that the links between them work.
  install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT tool)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs COMPONENT tool)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/serve/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples/serve
          COMPONENT tool)
endif()

set(CPACK_PACKAGE_NAME admit)
set(CPACK_PACKAGE_VENDOR admit)
set(CPACK_PACKAGE_CONTACT "admit developers <admit@localhost>")
# CPack's own default summary, so that CPackDeb takes each package's summary from the first line of its description
# below instead of putting the project's description before it.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING IGNORE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_TOOL_PACKAGE_NAME admit)
set(CPACK_DEBIAN_TOOL_PACKAGE_SECTION net)
# Each package's description: its summary line, then the long description (CPack indents it).
set(CPACK_DEBIAN_TOOL_DESCRIPTION "admission control: rate and concurrency limits from the shell and for Envoy
admit decides whether work may start now, later or not at all. `admit run` shares a
limit between shell and cron jobs of many machines (through Redis); `admit serve`
answers Envoy's rate-limit protocol from envoyproxy/ratelimit's YAML, with the
systemd unit admit-serve.service; `admit replay` and `admit recommend` pick limits
from real traffic.")
# The shared libraries' packages (dpkg-shlibdeps), and what the maintainer scripts call.
set(CPACK_DEBIAN_TOOL_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_TOOL_PACKAGE_DEPENDS "passwd, init-system-helpers")
set(admit_control_dir ${PROJECT_BINARY_DIR}/packaging)
file(MAKE_DIRECTORY ${admit_control_dir})
set(admit_conffiles "")
foreach(rule IN LISTS admit_example_rules)
  get_filename_component(rule_name ${rule} NAME)
  string(APPEND admit_conffiles "/etc/admit/serve/${rule_name}\n")
endforeach()
file(WRITE ${admit_control_dir}/conffiles "${admit_conffiles}")
foreach(script IN ITEMS postinst prerm postrm)
  configure_file(${PROJECT_SOURCE_DIR}/packaging/${script} ${admit_control_dir}/${script} COPYONLY)
endforeach()
set(CPACK_DEBIAN_TOOL_PACKAGE_CONTROL_EXTRA
    "${admit_control_dir}/conffiles;${admit_control_dir}/postinst;${admit_control_dir}/prerm;${admit_control_dir}/postrm")
set(CPACK_DEBIAN_TOOL_PACKAGE_CONTROL_STRICT_PERMISSION ON)

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libadmit-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "admission control for C++20: rate and concurrency limiters (development files)
Header-only rate limiters, semaphores and one admission decision for both, with Asio
integration; admit::redis (the compiled library) shares them across processes through
Redis. The CMake package: find_package(admit) and admit::admit, admit::asio,
admit::redis.")
# What admit-config.cmake finds (Boost >= 1.81 for admit::asio; hiredis through pkg-config and OpenSSL for
# admit::redis) and a compiler for C++20.
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS "libboost1.81-dev, libhiredis-dev, libssl-dev, pkg-config, g++ (>= 4:12) | clang (>= 1:14)")

set(CPACK_COMPONENTS_ALL tool dev)
include(CPack)
