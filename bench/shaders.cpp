#include "bench/shaders.hpp"

#include <cstddef>

#include "vk/shader_blob.hpp"

namespace diffvk::bench {
void register_bench_shaders() {
  size_t n = 0;
  const ShaderBlob* blobs = bench_embedded_shaders(&n);
  register_shader_table(blobs, n);  // idempotent
}
}  // namespace diffvk::bench
