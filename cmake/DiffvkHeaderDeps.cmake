# Header-only dependencies (nlohmann-json, doctest, CLI11, stb) without leaking the host into the build.
#
# Each dependency's header directory is found on the HOST (they are architecture-independent:
# Debian's packages are Architecture: all), copied into <build>/deps/<name>/include, and exposed as an
# INTERFACE target `diffvk_dep_<name>` whose only include directory is that copy. Nothing here ever
# adds /usr/include (or any other system directory) to a compile command: in an NDK build such a flag
# puts glibc's headers ahead of bionic's and libc++'s. `.ci/check-host-includes` proves it on the
# aarch64 cross build (compile_commands.json may name only the source tree, the build tree and the
# sysroot).
#
#   diffvk_header_dep(<name> <header> <dir-to-copy> <Debian package>)
#     <header>: a path relative to the include root that identifies it (nlohmann/json.hpp)
#     <dir-to-copy>: the directory under the include root to stage (nlohmann)
#   The include root can be given with -DDIFFVK_<NAME>_INCLUDE_DIR=<dir> (cache variable).
include_guard(GLOBAL)

function(diffvk_header_dep name header subdir package)
  if(TARGET diffvk_dep_${name})
    return()
  endif()
  string(TOUPPER "${name}" upper)
  set(var DIFFVK_${upper}_INCLUDE_DIR)
  if("${${var}}" STREQUAL "")  # an empty value (older build trees cached one) means "search"
    unset(${var} CACHE)
  endif()
  # Host search (NO_CMAKE_FIND_ROOT_PATH): a cross/NDK sysroot has none of these packages.
  find_path(${var} ${header} NO_CMAKE_FIND_ROOT_PATH
            DOC "Directory containing ${header} (staged into the build tree; never passed to the compiler)")
  if(NOT ${var} OR NOT EXISTS "${${var}}/${header}")
    message(FATAL_ERROR "diffvk: ${header} was not found (Debian/Ubuntu: apt-get install ${package}; "
                        "or -D${var}=<directory containing ${header}>)")
  endif()
  set(stage "${PROJECT_BINARY_DIR}/deps/${name}/include")
  file(COPY "${${var}}/${subdir}" DESTINATION "${stage}")
  add_library(diffvk_dep_${name} INTERFACE)
  target_include_directories(diffvk_dep_${name} SYSTEM INTERFACE "$<BUILD_INTERFACE:${stage}>")
endfunction()
