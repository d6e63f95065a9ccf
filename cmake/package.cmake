# `make package`: the Debian package (CPack DEB; docs/ops/package.md). What `make install`
# installs (executable, libraries, headers, pkg-config file, the Lua package, the nginx
# module), under /usr, plus the files only a system package has — component "deb",
# left out of a plain `cmake --install` so that one never writes /etc:
#   /etc/ron-accounting/ron-accounting.conf.lua     the default configuration (a conffile)
#   /lib/systemd/system/ron-accounting.service      the unit (Type=notify, StateDirectory=)
#   /usr/share/ron-accounting/                      daemon.lua, the rate card, alert rules
#   /usr/share/nginx/modules-available/             the nginx module's load_module line
#   /usr/share/doc/ron-accounting/                  copyright, changelog, README, reference
# Tested by ctest package-deb (tests/host/package.sh): lintian, dpkg -x, --check, a start and
# stop, systemd-analyze verify.
set(_ra_pkg ${CMAKE_SOURCE_DIR}/packaging)
set(_ra_share /usr/share/ron-accounting)
set(_ra_doc /usr/share/doc/ron-accounting)
install(FILES ${_ra_pkg}/ron-accounting.conf.lua DESTINATION /etc/ron-accounting
        COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${_ra_pkg}/ron-accounting.service DESTINATION /lib/systemd/system
        COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${CMAKE_SOURCE_DIR}/examples/daemon.lua ${CMAKE_SOURCE_DIR}/examples/record.lua
        DESTINATION ${_ra_share} COMPONENT deb EXCLUDE_FROM_ALL)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/examples/cards ${CMAKE_SOURCE_DIR}/examples/prometheus
        DESTINATION ${_ra_share} COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${_ra_pkg}/nginx-mod.conf DESTINATION /usr/share/nginx/modules-available
        RENAME mod-http-ron-accounting.conf COMPONENT deb EXCLUDE_FROM_ALL)
# Debian policy 12.7: a native package's changelog.gz, compressed with gzip -9n
set(_ra_changelog ${CMAKE_BINARY_DIR}/package/changelog.gz)
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/package)
file(WRITE ${CMAKE_BINARY_DIR}/package/changelog
  "ron-accounting (${PROJECT_VERSION}) unstable; urgency=medium\n\n"
  "  * Built from the ron-accounting source tree by `make package` (CPack).\n\n"
  " -- ron-accounting maintainers <maintainers@ron-accounting.example.org>  "
  "Sun, 01 Nov 2026 00:00:00 +0000\n")
install(CODE "execute_process(COMMAND gzip -9nf \"${CMAKE_BINARY_DIR}/package/changelog\"
                              -c OUTPUT_FILE \"${_ra_changelog}\")" COMPONENT deb EXCLUDE_FROM_ALL)
install(FILES ${_ra_changelog} ${_ra_pkg}/copyright ${CMAKE_SOURCE_DIR}/README.md
        DESTINATION ${_ra_doc} COMPONENT deb EXCLUDE_FROM_ALL)
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/reference DESTINATION ${_ra_doc}
        COMPONENT deb EXCLUDE_FROM_ALL)

file(WRITE ${CMAKE_BINARY_DIR}/package/conffiles
  "/etc/ron-accounting/ron-accounting.conf.lua\n")
# the shared libraries: ldconfig runs as a trigger (Debian policy 8.1.1)
file(WRITE ${CMAKE_BINARY_DIR}/package/triggers "activate-noawait ldconfig\n")
# install(FILES) does not strip: the nginx module, stripped in the staging tree
install(CODE "
  set(_m \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/nginx/modules/ngx_http_ron_accounting_module.so\")
  if(EXISTS \"\${_m}\")
    execute_process(COMMAND strip --strip-unneeded --remove-section=.comment
                            --remove-section=.note \"\${_m}\")
  endif()" COMPONENT deb EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ron-accounting)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ron-accounting maintainers <maintainers@ron-accounting.example.org>")
set(CPACK_PACKAGE_VENDOR "ron-accounting")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "usage metering, ledger, wallet and audit trail for API gateways")
# (the extended description: CPack puts the summary above it and indents each line)
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
  "ron-accounting counts what an API gateway serves per tenant into sealed,
hash-chained usage slices, rates them into a double-entry ledger, serves
prepaid wallets over the same book and keeps a signed audit trail of every
decision. This package holds the daemon (a systemd service), the C
libraries with their headers and pkg-config file, the Lua package and the
native nginx module.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dlopen'ed through LuaJIT's FFI (dpkg-shlibdeps cannot see those)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libsqlite3-0")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "nginx, libnginx-mod-http-lua, prometheus")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_BINARY_DIR}/package/conffiles
                                      ${CMAKE_BINARY_DIR}/package/triggers)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_STRIP_FILES TRUE)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# one package of every component, the "deb" one included
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ALL_COMPONENTS_IN_ONE)
set(CPACK_COMPONENTS_ALL Unspecified deb)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_BINARY_DIR}/package)
include(CPack)
