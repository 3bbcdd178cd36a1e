# CTest driver: cmake -DMODE=package|subdirectory -DSRC=<diffvk src> -DBIN=<diffvk build> -DWORK=<scratch> -P run.cmake
# package: installs the build into a prefix, builds the consumers with find_package(diffvk), and also a C
# program with nothing but `pkg-config --cflags --libs diffvk` (the installed diffvk.pc).
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
  set(run_out "${out}" PARENT_SCOPE)
endfunction()
if(MODE STREQUAL "package")
  run(${CMAKE_COMMAND} --install ${BIN} --prefix ${WORK}/prefix)
  foreach(f include/diffvk/diffvk.h include/diffvk/diffvk_bench.h lib/libdiffvk.a lib/libdiffvk.so lib/libdiffvk_bench.a
            lib/libdiffvk_bench.so lib/pkgconfig/diffvk.pc
            lib/cmake/diffvk/diffvkConfig.cmake share/doc/diffvk/LICENSE share/doc/diffvk/CHANGELOG.md)
    # GNUInstallDirs may pick lib64 or lib/<triplet>: accept any lib* directory.
    string(REPLACE "lib/" "lib*/" pattern "${f}")
    file(GLOB found "${WORK}/prefix/${pattern}")
    if(NOT found)
      message(FATAL_ERROR "install: ${f} is missing from the prefix")
    endif()
  endforeach()
  run(${CMAKE_COMMAND} -S ${SRC}/tests/consumer -B ${WORK}/build -DDIFFVK_MODE=package -DCMAKE_PREFIX_PATH=${WORK}/prefix)
  # pkg-config: the C ABI with the flags diffvk.pc gives, against libdiffvk.so.
  file(GLOB pcdir "${WORK}/prefix/lib*/pkgconfig")
  set(ENV{PKG_CONFIG_PATH} "${pcdir}")
  run(pkg-config --modversion diffvk)
  string(STRIP "${run_out}" pc_version)
  file(STRINGS ${SRC}/include/diffvk/diffvk.h v REGEX "^#define DIFFVK_VERSION_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3" want "${v}")
  if(NOT pc_version STREQUAL want)
    message(FATAL_ERROR "pkg-config --modversion diffvk = '${pc_version}', the header says ${want}")
  endif()
  run(pkg-config --cflags --libs diffvk)
  separate_arguments(pc_flags UNIX_COMMAND "${run_out}")
  run(cc ${SRC}/tests/consumer/version.c ${pc_flags} -o ${WORK}/consumer_pc)
  get_filename_component(libdir "${pcdir}" DIRECTORY)
  set(ENV{LD_LIBRARY_PATH} "${libdir}")
  run(${WORK}/consumer_pc)
else()
  # CMAKE_BUILD_TYPE=None (no optimisation flags): an application's own build type applies to an embedded diffvk,
  # and this build is compile-bound (measured: about half the time of the Release default diffvk would pick).
  run(${CMAKE_COMMAND} -S ${SRC}/tests/consumer -B ${WORK}/build -DDIFFVK_MODE=subdirectory -DDIFFVK_SOURCE_DIR=${SRC}
      -DCMAKE_BUILD_TYPE=None)
endif()
if(MODE STREQUAL "package")
  run(${CMAKE_COMMAND} --build ${WORK}/build -j 2)
  run(${WORK}/build/consumer)
  run(${WORK}/build/consumer_c)
  run(${WORK}/build/consumer_bench)
else()
  # add_subdirectory compiles the library from source inside this test (pass 1's longest test: 193 s). The
  # C++ and C consumers prove the embedding; the benchmark library's embedding is proven by the package mode
  # (the same targets), so its ~50 extra sources are not compiled a third time here.
  run(${CMAKE_COMMAND} --build ${WORK}/build -j 2 --target consumer consumer_c)
  run(${WORK}/build/consumer)
  run(${WORK}/build/consumer_c)
endif()
