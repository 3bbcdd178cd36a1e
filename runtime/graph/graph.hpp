// The forward graph: ops declared on symbolic tensors, and everything else derived from it.
//
// A recipe (runtime/model/recipe.hpp) adds tensors and nodes; nothing else numbers steps, sizes scratch
// or places intermediates:
//   - derive_lifetimes(): each planned tensor's first and last use, from the nodes that read and write it
//     (the only source of TensorLifetime in the library);
//   - plan_graphs(): the static planner (plan/memory_plan.hpp) places the planned tensors of one or more
//     graph variants in one arena (variants are programs that never run at the same time, so their
//     timelines follow each other and they share the memory);
//   - record_graph(): the nodes in order into a Program, whose barrier planner inserts the barriers.
// The derivation is pure (no device): tests/graph/ checks it on random graphs.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plan/memory_plan.hpp"
#include "vk/program.hpp"

namespace diffvk {

// What a tensor is to the graph. Planned tensors (activation, input, output, scratch) get arena memory
// from the plan; bound tensors (weight, kv_cache, external) name memory the caller owns.
enum class TensorRole : uint8_t {
  weight,      // bound, read only
  kv_cache,    // bound, read and written; persists across programs
  external,    // bound: other caller-owned buffers (token ids, the position, a debug tap's output)
  activation,  // planned; lives from its first to its last use
  input,       // planned; written by the host before the program runs (live from the first node)
  output,      // planned; read by the host after the program ran (live to the last node)
  scratch,     // planned; raw bytes an op uses internally (e.g. split-K partials)
};
const char* role_name(TensorRole r);
bool is_planned(TensorRole r);

enum class ElemType : uint8_t { f16, f32, u32, bytes };
const char* elem_type_name(ElemType t);
uint64_t elem_type_bytes(ElemType t);  // 1 for bytes

struct TensorRef {
  uint32_t id = UINT32_MAX;
  bool valid() const { return id != UINT32_MAX; }
};

struct GraphTensor {
  std::string name;
  TensorRole role = TensorRole::activation;
  ElemType dtype = ElemType::f32;
  std::vector<uint64_t> shape;  // elements; {bytes} for ElemType::bytes
  uint64_t bytes = 0;           // product of shape x element size
  BufferRange bound{};          // bound roles only
};

class Graph;
// What a node's record function sees: every tensor it touches resolved to memory.
class GraphBinding {
 public:
  explicit GraphBinding(const Graph& g, const std::vector<BufferRange>& planned) : g_(g), planned_(planned) {}
  BufferRange operator[](TensorRef t) const;

 private:
  const Graph& g_;
  const std::vector<BufferRange>& planned_;  // one per tensor id (empty range for bound tensors)
};

using RecordFn = std::function<void(Program&, const GraphBinding&)>;

struct GraphNode {
  std::string label;
  std::vector<TensorRef> reads, writes;  // a read_write argument appears in both
  RecordFn record;                       // may be empty in pure tests
  bool group_end = false;                // Program::checkpoint() after this node
  std::string kernel;                    // the kernel and variant the node records (Graph::kernel; `diffvk plan`)
};

class Graph {
 public:
  explicit Graph(std::string name = "graph") : name_(std::move(name)) {}
  // Bound tensors (weight, kv_cache, external): memory the caller owns.
  TensorRef bind(std::string name, TensorRole role, ElemType dtype, std::vector<uint64_t> shape, BufferRange range);
  // Planned tensors (activation, input, output, scratch). Names must be unique in a graph.
  TensorRef tensor(std::string name, TensorRole role, ElemType dtype, std::vector<uint64_t> shape);
  TensorRef scratch(std::string name, uint64_t bytes) {
    return tensor(std::move(name), TensorRole::scratch, ElemType::bytes, {bytes});
  }
  // Adds a node. Throws Error(internal) for an unknown tensor, a write to a weight, or a read of a planned
  // tensor that no earlier node wrote (inputs excepted): the recipe would read undefined memory.
  void add(std::string label, std::vector<TensorRef> reads, std::vector<TensorRef> writes, RecordFn record = {});
  void end_group();  // the abort callback of Program::run is asked after the last node added so far
  // Names the kernel (and its variant) the last node added records: the ops' own choice functions say it (e.g.
  // LinearKernel::matmul_choice), so that the plan shows the kernel choice of every node (`diffvk plan`).
  void kernel(std::string what);

  const std::string& name() const { return name_; }
  const std::vector<GraphTensor>& tensors() const { return tensors_; }
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  const GraphTensor& at(TensorRef t) const;
  TensorRef find(const std::string& name) const;  // invalid when absent

 private:
  std::string name_;
  std::vector<GraphTensor> tensors_;
  std::vector<GraphNode> nodes_;
  std::vector<bool> written_;
};

// One lifetime per planned tensor that some node uses, in tensor-id order, steps = node indices (+ offset).
// Inputs start at the first node, outputs end at the last; a planned tensor that no node uses is an
// error (Error internal: the recipe declared memory it never touches). `ids` receives each lifetime's tensor id.
std::vector<TensorLifetime> derive_lifetimes(const Graph& g, uint64_t alignment, int step_offset = 0,
                                             std::vector<uint32_t>* ids = nullptr);

// Several variants of a forward pass (e.g. prefill and decode programs of one session) placed in one arena.
struct GraphPlan {
  std::vector<TensorLifetime> lifetimes;  // every variant's, variant after variant, names "<variant>: <tensor>"
  MemoryPlan plan;
  struct Variant {
    std::string name;
    std::vector<std::pair<std::string, size_t>> tensors;  // tensor name -> index into lifetimes
    int first_step = 0, last_step = 0;
  };
  std::vector<Variant> variants;
  const Variant* variant(const std::string& name) const;
};
// The variants' timelines follow each other (they never run at once), so the arena is the largest
// variant's need when the planner reaches the lower bound.
GraphPlan plan_graphs(const std::vector<const Graph*>& variants, uint64_t max_buffer_bytes, uint64_t base_alignment);

// Places graph `g` where variant `v` of `p` placed the same-named tensors (g may be a smaller instance of
// the variant: fewer rows, or a debug tap). Checks that every planned tensor of g has a counterpart at
// least as large and that, with g's own derived lifetimes, no two tensors live at once overlap
// (check_plan); throws Error(internal) otherwise. Returns the arena placement of each of g's tensors
// (by id; bound tensors get an empty range). `arena`: the chunks' buffer handles.
std::vector<BufferRange> fit_graph(const Graph& g, const GraphPlan& p, const std::string& variant,
                                   const std::vector<VkBuffer>& arena, uint64_t max_buffer_bytes,
                                   uint64_t base_alignment);

// Records g's nodes in order (a checkpoint after each group end).
void record_graph(const Graph& g, const std::vector<BufferRange>& placed, Program& program);

}  // namespace diffvk
