// diffvk_bench's embedded shaders (shaders/bench/*.comp: the copy ceiling and the baselines), made
// visible to Pipeline (find_shader) on first use. Every constructor of a bench pipeline calls it.
#pragma once

namespace diffvk::bench {
void register_bench_shaders();
}
