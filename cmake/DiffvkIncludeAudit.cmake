# Writes <build>/include-audit/<target>.txt: every include directory a compiled target gets, one per
# line, BEFORE CMake drops the ones it believes implicit (with a sysroot, CMake silently leaves out
# /usr/include although the compiler then searches <sysroot>/usr/include instead, so
# compile_commands.json alone can hide a host directory). `.ci/check-host-includes` reads these files
# and compile_commands.json.
include_guard(GLOBAL)
function(diffvk_include_audit dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(t IN LISTS targets)
    get_target_property(type ${t} TYPE)
    if(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      file(GENERATE OUTPUT "${PROJECT_BINARY_DIR}/include-audit/${t}.txt"
           CONTENT "$<JOIN:$<TARGET_PROPERTY:${t},INCLUDE_DIRECTORIES>,\n>\n")
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(s IN LISTS subdirs)
    diffvk_include_audit("${s}")
  endforeach()
endfunction()
