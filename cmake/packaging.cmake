# SPDX-License-Identifier: Apache-2.0
# Install rules for the files in packaging/ and the CPack settings behind
# `make package`: a .deb and an .rpm of the stripefs binary, the mount(8)
# helper, the systemd unit template, man pages and bash completion.
# Included at the end of the top-level CMakeLists.txt; the binary's own
# install() rule is in tools/CMakeLists.txt.
#
# Where things go (prefix /usr in the packages, CMAKE_INSTALL_PREFIX for
# `cmake --install`):
#   PREFIX/bin/stripefs                                    (tools/)
#   /sbin/mount.fuse.stripefs                              mount(8) looks for helpers in /sbin only
#   PREFIX/lib/systemd/system/stripefs@.service
#   /etc/stripefs/example.conf.sample                      the unit reads /etc/stripefs/NAME.conf
#   PREFIX/share/man/man1/stripefs.1.gz, man8/mount.fuse.stripefs.8.gz
#   PREFIX/share/bash-completion/completions/stripefs
#   PREFIX/share/doc/stripefs/{README.md,operations.md,semantics.md}
#   PREFIX/share/doc/stripefs/copyright                    the .deb only (Debian's machine-readable format)
#   PREFIX/share/doc/stripefs/LICENSE                      the .rpm only, as its %license
#   PREFIX/share/stripefs/grafana/stripefs.json            a Grafana dashboard for -o metrics_listen
#   PREFIX/lib/python3/dist-packages/stripefs.*.so         the Python module (python/)

include(GNUInstallDirs)
set(_pkg ${PROJECT_SOURCE_DIR}/packaging)
set(_pkg_out ${CMAKE_BINARY_DIR}/packaging)

# --- man pages: the version filled in, gzipped as distributions ship them ----
set(_man_gz)
foreach(page stripefs.1 mount.fuse.stripefs.8)
  string(REGEX MATCH "[0-9]$" _section ${page})
  set(VERSION ${PROJECT_VERSION})
  configure_file(${_pkg}/man/${page} ${_pkg_out}/man/${page} @ONLY)
  add_custom_command(OUTPUT ${_pkg_out}/man/${page}.gz
                     COMMAND gzip -9 -n -f -k ${page}
                     DEPENDS ${_pkg_out}/man/${page}
                     WORKING_DIRECTORY ${_pkg_out}/man
                     COMMENT "Compressing man page ${page}")
  list(APPEND _man_gz ${_pkg_out}/man/${page}.gz)
  install(FILES ${_pkg_out}/man/${page}.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man${_section})
endforeach()
add_custom_target(stripefs_man ALL DEPENDS ${_man_gz})

# --- the mount helper and the systemd unit name the installed binary ---------
# They are filled in at install time, with the prefix of that install: /usr
# when CPack builds a package (whatever this tree's CMAKE_INSTALL_PREFIX is),
# CMAKE_INSTALL_PREFIX for `cmake --install`.
install(CODE "
  set(STRIPEFS_BIN \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}/stripefs\")
  configure_file(\"${_pkg}/mount.fuse.stripefs\" \"${_pkg_out}/install/mount.fuse.stripefs\" @ONLY)
  configure_file(\"${_pkg}/stripefs@.service\" \"${_pkg_out}/install/stripefs@.service\" @ONLY)
")
install(PROGRAMS ${_pkg_out}/install/mount.fuse.stripefs DESTINATION /sbin)
install(FILES ${_pkg_out}/install/stripefs@.service DESTINATION lib/systemd/system)
install(FILES ${_pkg}/example.conf.sample DESTINATION /etc/stripefs)
install(FILES ${_pkg}/completion/stripefs DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions)
install(FILES ${_pkg}/grafana/stripefs.json DESTINATION ${CMAKE_INSTALL_DATADIR}/stripefs/grafana)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/operations.md
              ${PROJECT_SOURCE_DIR}/docs/semantics.md
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/stripefs)
# The license, as each format wants it: Debian a copyright file in the
# package's doc directory (the full text is /usr/share/common-licenses/Apache-2.0),
# RPM the license text marked %license. Both are installed (so `cmake
# --install` has them too); the pre-build script below drops from each
# package the one the other format wants.
install(FILES ${PROJECT_SOURCE_DIR}/LICENSE ${_pkg}/deb/copyright
        DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/stripefs)

# --- CPack -------------------------------------------------------------------
set(CPACK_GENERATOR "DEB;RPM")
set(CPACK_PACKAGE_NAME stripefs)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "stripefs")
set(_default_contact "stripefs developers <maintainers@stripefs.dev>")
set(STRIPEFS_PACKAGE_CONTACT "${_default_contact}"
    CACHE STRING "Maintainer named in the .deb and .rpm")
# A build tree configured before carries the old placeholder in its cache.
if(STRIPEFS_PACKAGE_CONTACT STREQUAL "stripefs maintainers <root@localhost>")
  set(STRIPEFS_PACKAGE_CONTACT "${_default_contact}" CACHE STRING "Maintainer named in the .deb and .rpm" FORCE)
endif()
set(CPACK_PACKAGE_CONTACT "${STRIPEFS_PACKAGE_CONTACT}")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "FUSE filesystem that stripes files over NVMe drives")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "stripefs stores every file as an object cut into fixed-size chunks and stripes\n"
    "those chunks, with optional replicas, across several NVMe drives (or files\n"
    "standing in for them). RocksDB records where every chunk lives; an io_uring\n"
    "data engine moves the bytes to all drives at once and checks a crc32c on\n"
    "every 4 KiB block. Mount it with `mount -t fuse.stripefs`, an fstab line or\n"
    "the stripefs@.service unit; `stripefs placement` shows where a file's bytes are.")
# The packages install under /usr, whatever CMAKE_INSTALL_PREFIX this tree has.
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# `make package` copies the packages to dist/; staging stays in the build tree.
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/cpack)
set(CPACK_OUTPUT_FILE_PREFIX ${PROJECT_SOURCE_DIR}/dist)
# Runs in the staging tree of each package before it is built: the .deb
# keeps the copyright file, the .rpm the LICENSE (see the install rule above).
set(_doc_staged "\${CPACK_TEMPORARY_DIRECTORY}\${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/doc/stripefs")
file(WRITE ${_pkg_out}/license_files.cmake
     "if(CPACK_GENERATOR STREQUAL \"DEB\")\n"
     "  file(REMOVE \"${_doc_staged}/LICENSE\")\n"
     "elseif(CPACK_GENERATOR STREQUAL \"RPM\")\n"
     "  file(REMOVE \"${_doc_staged}/copyright\")\n"
     "endif()\n")
set(CPACK_PRE_BUILD_SCRIPTS ${_pkg_out}/license_files.cmake)

# deb: stripefs_VERSION_ARCH.deb; the shared libraries' packages come from
# dpkg-shlibdeps, fuse3 (fusermount3, /dev/fuse setup) is named by hand.
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "fuse3")
file(WRITE ${_pkg_out}/deb/conffiles "/etc/stripefs/example.conf.sample\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${_pkg_out}/deb/conffiles ${_pkg}/deb/postinst ${_pkg}/deb/prerm ${_pkg}/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# rpm: stripefs-VERSION-1.ARCH.rpm; rpm's automatic dependency scan adds the
# shared libraries, fuse3 is named by hand.
set(CPACK_RPM_FILE_NAME RPM-DEFAULT)
set(CPACK_RPM_PACKAGE_RELEASE 1)
set(CPACK_RPM_PACKAGE_LICENSE "Apache-2.0")
set(CPACK_RPM_PACKAGE_REQUIRES "fuse3")
set(CPACK_RPM_PACKAGE_AUTOREQ yes)
set(CPACK_PACKAGE_RELOCATABLE OFF)  # absolute paths (/sbin, /etc): a relocatable rpm makes no sense
set(CPACK_RPM_PACKAGE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
# CPack marks files installed to absolute paths as %config; only the sample
# is one, the helper is a plain file. The license text is the package's %license.
set(CPACK_RPM_USER_FILELIST "%config(noreplace) /etc/stripefs/example.conf.sample" "%attr(0755,root,root) /sbin/mount.fuse.stripefs"
    "%license ${CPACK_PACKAGING_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/doc/stripefs/LICENSE")
# No /usr/lib/.build-id links: that tree is shared with every other package.
set(CPACK_RPM_SPEC_MORE_DEFINE "%define _build_id_links none")
set(CPACK_RPM_POST_INSTALL_SCRIPT_FILE ${_pkg}/rpm/post)
set(CPACK_RPM_PRE_UNINSTALL_SCRIPT_FILE ${_pkg}/rpm/preun)
set(CPACK_RPM_POST_UNINSTALL_SCRIPT_FILE ${_pkg}/rpm/postun)
# Directories that belong to the system (filesystem, systemd, man-db,
# bash-completion, python3 packages), never to stripefs.
set(CPACK_RPM_EXCLUDE_FROM_AUTO_FILELIST_ADDITION
    /sbin
    /usr/lib/systemd /usr/lib/systemd/system
    /usr/lib/python3 /usr/lib/python3/dist-packages
    /usr/share/man /usr/share/man/man1 /usr/share/man/man8
    /usr/share/bash-completion /usr/share/bash-completion/completions)

include(CPack)
