# diffvk — cross-compile for 64-bit Arm Linux with Debian's cross toolchain, run through qemu.
#
#   apt-get install g++-aarch64-linux-gnu qemu-user-static
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install libvulkan-dev:arm64 mesa-vulkan-drivers:arm64 vulkan-validationlayers:arm64
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=platform/toolchains/aarch64-linux-gnu.cmake
#   cmake --build build-aarch64 -j
#   VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.aarch64.json ctest --test-dir build-aarch64
#
# .ci/aarch64 does all of this (and runs a test subset on two Mesa versions).
#
# Layout: Debian multiarch, where the arm64 packages install into the host's /usr. So that nothing of
# the host leaks into the build (the way it would in an NDK build, where /usr/include puts glibc ahead
# of bionic), this file stages a SYSROOT in <build>/aarch64-sysroot holding links to exactly the files
# of the target packages the build needs (DIFFVK_CROSS_PACKAGES: libvulkan-dev:arm64 libvulkan1:arm64,
# listed with dpkg -L), sets CMAKE_SYSROOT to it and searches headers, libraries and packages ONLY
# there (CMAKE_FIND_ROOT_PATH_MODE_INCLUDE/LIBRARY/PACKAGE=ONLY). The C/C++ runtime comes from the
# cross compiler's own directories (/usr/aarch64-linux-gnu, /usr/lib/gcc-cross), which --sysroot does
# not move. The header-only packages (doctest, nlohmann-json, CLI11, stb) are Architecture: all: they
# are copied into the build tree (cmake/DiffvkHeaderDeps.cmake), never named by an -I of /usr/include.
# glslc is a HOST program: the top CMakeLists finds it with NO_CMAKE_FIND_ROOT_PATH.
# .ci/check-host-includes <build>/compile_commands.json fails if any compile names a host include dir.
#
# Running target binaries: there is no binfmt_misc in CI containers, so every target executable
# that CMake/CTest runs (doctest test discovery, add_test commands) goes through
# CMAKE_CROSSCOMPILING_EMULATOR. The arm64 dynamic loader and libc come from libc6:arm64 (pulled in by
# libvulkan1:arm64), so qemu needs no -L prefix. Run a binary by hand with
#   qemu-aarch64-static build-aarch64/examples/diffvk info
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(DIFFVK_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${DIFFVK_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${DIFFVK_CROSS_TRIPLE}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${DIFFVK_CROSS_TRIPLE})

# pkg-config (if anything uses it) must see only the target's .pc files and arch-independent ones.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${DIFFVK_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig")

# ---- the staged sysroot (links to the target packages' files) -------------------------------------------
# try_compile projects get DIFFVK_CROSS_SYSROOT from the top-level configure (CMAKE_TRY_COMPILE_PLATFORM_VARIABLES).
set(DIFFVK_CROSS_PACKAGES "libvulkan-dev:arm64;libvulkan1:arm64" CACHE STRING "Target packages linked into the staged sysroot")
if(NOT DIFFVK_CROSS_SYSROOT)
  set(DIFFVK_CROSS_SYSROOT "${CMAKE_BINARY_DIR}/aarch64-sysroot")
  execute_process(COMMAND dpkg -L ${DIFFVK_CROSS_PACKAGES} RESULT_VARIABLE _dvk_rc OUTPUT_VARIABLE _dvk_files ERROR_VARIABLE _dvk_err)
  if(NOT _dvk_rc EQUAL 0)
    message(FATAL_ERROR "aarch64 toolchain: dpkg -L ${DIFFVK_CROSS_PACKAGES} failed (${_dvk_err}); install them:\n"
                        "  dpkg --add-architecture arm64 && apt-get update && apt-get install ${DIFFVK_CROSS_PACKAGES}")
  endif()
  string(REPLACE "\n" ";" _dvk_files "${_dvk_files}")
  foreach(f IN LISTS _dvk_files)
    if(f MATCHES "^/usr/(include|lib/${DIFFVK_CROSS_TRIPLE})/" AND NOT IS_DIRECTORY "${f}")
      get_filename_component(_dvk_dir "${DIFFVK_CROSS_SYSROOT}${f}" DIRECTORY)
      file(MAKE_DIRECTORY "${_dvk_dir}")
      file(CREATE_LINK "${f}" "${DIFFVK_CROSS_SYSROOT}${f}" SYMBOLIC)
    endif()
  endforeach()
endif()
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES DIFFVK_CROSS_SYSROOT)
set(CMAKE_SYSROOT "${DIFFVK_CROSS_SYSROOT}")
# The cross C++ runtime (libstdc++.so.6, libgcc_s) lies next to the compiler, not in the sysroot: let
# the linker find it when it resolves a shared library's dependencies (a C program on libdiffvk.so).
set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,/usr/${DIFFVK_CROSS_TRIPLE}/lib")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-Wl,-rpath-link,/usr/${DIFFVK_CROSS_TRIPLE}/lib")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# qemu-user runs the target binaries. Override with -DCMAKE_CROSSCOMPILING_EMULATOR=... if qemu lives
# elsewhere, or set it to "" on a real arm64 machine with binfmt_misc.
if(NOT DEFINED CMAKE_CROSSCOMPILING_EMULATOR)
  find_program(DIFFVK_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64 NO_CMAKE_FIND_ROOT_PATH)
  if(DIFFVK_QEMU_AARCH64)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${DIFFVK_QEMU_AARCH64})
  else()
    set(CMAKE_CROSSCOMPILING_EMULATOR /usr/bin/qemu-aarch64-static)
  endif()
endif()
