/* LD_PRELOAD shim for .ci/sanitize: dlclose() does nothing, so that the Vulkan loader's ICD and layer
 * libraries (lavapipe, LLVM, the validation layer) stay mapped until exit. LeakSanitizer then sees their
 * module names in allocation stacks, and tests/sanitizer/lsan.supp can suppress their one-time allocations
 * by library name; after a real dlclose their frames are "<unknown module>" and cannot be matched.
 * Newer loaders (>= 1.3.260) do the same with VK_LOADER_DISABLE_DYNAMIC_LIBRARY_UNLOADING=1; Debian 12
 * ships 1.3.239. Test-only: never used outside the sanitize run. */
int dlclose(void* handle) {
  (void)handle;
  return 0;
}
