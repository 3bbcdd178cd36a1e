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
# Layout: Debian multiarch, no separate sysroot. Target libraries live in /usr/lib/aarch64-linux-gnu
# (found through CMAKE_LIBRARY_ARCHITECTURE), headers in /usr/include (+ /usr/include/aarch64-linux-gnu),
# and the header-only packages (doctest, nlohmann-json, CLI11) are Architecture: all, so the host's
# copies serve the target too. glslc is a HOST program: the top CMakeLists finds it with
# NO_CMAKE_FIND_ROOT_PATH.
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

# No CMAKE_SYSROOT / CMAKE_FIND_ROOT_PATH: with multiarch, CMake's default search of
# /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE} already picks the arm64 libraries (libvulkan.so), and host
# programs (glslc) are found in /usr/bin as usual.

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
