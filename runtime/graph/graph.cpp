// The forward graph: tensors, nodes, the lifetime derivation, planning of variants and recording.
#include "graph/graph.hpp"

#include <algorithm>
#include <map>

#include "diffvk/error.hpp"

namespace diffvk {

const char* role_name(TensorRole r) {
  switch (r) {
    case TensorRole::weight:
      return "weight";
    case TensorRole::kv_cache:
      return "kv_cache";
    case TensorRole::external:
      return "external";
    case TensorRole::activation:
      return "activation";
    case TensorRole::input:
      return "input";
    case TensorRole::output:
      return "output";
    case TensorRole::scratch:
      return "scratch";
  }
  return "?";
}
bool is_planned(TensorRole r) {
  return r != TensorRole::weight && r != TensorRole::kv_cache && r != TensorRole::external;
}

const char* elem_type_name(ElemType t) {
  switch (t) {
    case ElemType::f16:
      return "f16";
    case ElemType::f32:
      return "f32";
    case ElemType::u32:
      return "u32";
    case ElemType::bytes:
      return "bytes";
  }
  return "?";
}
uint64_t elem_type_bytes(ElemType t) { return t == ElemType::f16 ? 2 : t == ElemType::bytes ? 1 : 4; }

namespace {
[[noreturn]] void fail(const std::string& what) { throw Error(Status::internal, "graph: " + what); }

uint64_t bytes_of(const std::string& name, ElemType dtype, const std::vector<uint64_t>& shape) {
  if (shape.empty()) fail("tensor '" + name + "' has no shape");
  uint64_t n = elem_type_bytes(dtype);
  for (uint64_t d : shape) {
    if (d == 0) fail("tensor '" + name + "' has a zero dimension");
    if (n > UINT64_MAX / d) fail("tensor '" + name + "' overflows 64 bits");
    n *= d;
  }
  return n;
}
}  // namespace

BufferRange GraphBinding::operator[](TensorRef t) const {
  const GraphTensor& gt = g_.at(t);
  if (!is_planned(gt.role)) return gt.bound;
  if (t.id >= planned_.size() || planned_[t.id].buffer == VK_NULL_HANDLE)
    fail("tensor '" + gt.name + "' is not placed");
  return planned_[t.id];
}

TensorRef Graph::bind(std::string name, TensorRole role, ElemType dtype, std::vector<uint64_t> shape,
                      BufferRange range) {
  if (is_planned(role)) fail("bind() takes bound roles only ('" + name + "' is " + role_name(role) + ")");
  if (find(name).valid()) fail("two tensors named '" + name + "'");
  GraphTensor t{std::move(name), role, dtype, std::move(shape), 0, range};
  t.bytes = bytes_of(t.name, dtype, t.shape);
  if (range.buffer != VK_NULL_HANDLE && range.size < t.bytes)
    fail("bound tensor '" + t.name + "' needs " + std::to_string(t.bytes) + " bytes; its range has " +
         std::to_string(range.size));
  tensors_.push_back(std::move(t));
  written_.push_back(true);  // caller-owned memory holds data
  return TensorRef{uint32_t(tensors_.size() - 1)};
}

TensorRef Graph::tensor(std::string name, TensorRole role, ElemType dtype, std::vector<uint64_t> shape) {
  if (!is_planned(role)) fail("tensor() takes planned roles only ('" + name + "' is " + role_name(role) + ")");
  if (find(name).valid()) fail("two tensors named '" + name + "'");
  GraphTensor t{std::move(name), role, dtype, std::move(shape), 0, {}};
  t.bytes = bytes_of(t.name, dtype, t.shape);
  tensors_.push_back(std::move(t));
  written_.push_back(role == TensorRole::input);
  return TensorRef{uint32_t(tensors_.size() - 1)};
}

const GraphTensor& Graph::at(TensorRef t) const {
  if (!t.valid() || t.id >= tensors_.size()) fail("unknown tensor id in graph '" + name_ + "'");
  return tensors_[t.id];
}

TensorRef Graph::find(const std::string& name) const {
  for (size_t i = 0; i < tensors_.size(); ++i)
    if (tensors_[i].name == name) return TensorRef{uint32_t(i)};
  return {};
}

void Graph::add(std::string label, std::vector<TensorRef> reads, std::vector<TensorRef> writes, RecordFn record) {
  for (TensorRef t : reads) {
    const GraphTensor& gt = at(t);
    const bool also_written = std::any_of(writes.begin(), writes.end(), [&](TensorRef w) { return w.id == t.id; });
    // A scratch tensor an op both writes and reads (read_write) is defined by the op itself.
    if (!written_[t.id] && !(also_written && gt.role == TensorRole::scratch))
      fail("node '" + label + "' reads '" + gt.name + "' before any node wrote it");
  }
  for (TensorRef t : writes) {
    if (at(t).role == TensorRole::weight) fail("node '" + label + "' writes the weight '" + at(t).name + "'");
    written_[t.id] = true;
  }
  nodes_.push_back(GraphNode{std::move(label), std::move(reads), std::move(writes), std::move(record), false});
}

void Graph::end_group() {
  if (!nodes_.empty()) nodes_.back().group_end = true;
}

void Graph::kernel(std::string what) {
  if (!nodes_.empty()) nodes_.back().kernel = std::move(what);
}

std::vector<TensorLifetime> derive_lifetimes(const Graph& g, uint64_t alignment, int step_offset,
                                             std::vector<uint32_t>* ids) {
  const auto& ts = g.tensors();
  const int n = static_cast<int>(g.nodes().size());
  std::vector<int> first(ts.size(), -1), last(ts.size(), -1);
  for (int i = 0; i < n; ++i) {
    const GraphNode& node = g.nodes()[size_t(i)];
    for (const auto* list : {&node.reads, &node.writes})
      for (TensorRef t : *list) {
        if (first[t.id] < 0) first[t.id] = i;
        last[t.id] = i;
      }
  }
  std::vector<TensorLifetime> out;
  if (ids) ids->clear();
  for (size_t i = 0; i < ts.size(); ++i) {
    const GraphTensor& t = ts[i];
    if (!is_planned(t.role)) continue;
    if (first[i] < 0) fail("graph '" + g.name() + "': tensor '" + t.name + "' is declared but no node uses it");
    int f = first[i], l = last[i];
    if (t.role == TensorRole::input) f = 0;       // the host wrote it before the first node
    if (t.role == TensorRole::output) l = n - 1;  // the host reads it after the last node
    out.push_back({t.name, t.bytes, alignment, f + step_offset, l + step_offset});
    if (ids) ids->push_back(uint32_t(i));
  }
  return out;
}

const GraphPlan::Variant* GraphPlan::variant(const std::string& name) const {
  for (const auto& v : variants)
    if (v.name == name) return &v;
  return nullptr;
}

GraphPlan plan_graphs(const std::vector<const Graph*>& variants, uint64_t max_buffer_bytes, uint64_t base_alignment) {
  GraphPlan p;
  int offset = 0;
  for (const Graph* g : variants) {
    if (p.variant(g->name())) fail("two variants named '" + g->name() + "'");
    std::vector<uint32_t> ids;
    auto lts = derive_lifetimes(*g, base_alignment, offset, &ids);
    GraphPlan::Variant v{g->name(), {}, offset, offset + int(g->nodes().size()) - 1};
    for (size_t i = 0; i < lts.size(); ++i) {
      v.tensors.emplace_back(lts[i].name, p.lifetimes.size());
      lts[i].name = g->name() + ": " + lts[i].name;
      p.lifetimes.push_back(std::move(lts[i]));
    }
    p.variants.push_back(std::move(v));
    offset += std::max<int>(1, int(g->nodes().size()));
  }
  if (p.lifetimes.empty())
    p.lifetimes.push_back({"(none)", base_alignment, base_alignment, 0, 0});  // an arena of one slot
  p.plan = plan_memory(p.lifetimes, max_buffer_bytes, base_alignment);
  return p;
}

std::vector<BufferRange> fit_graph(const Graph& g, const GraphPlan& p, const std::string& variant,
                                   const std::vector<VkBuffer>& arena, uint64_t max_buffer_bytes,
                                   uint64_t base_alignment) {
  const GraphPlan::Variant* v = p.variant(variant);
  if (!v) fail("no planned variant '" + variant + "' for graph '" + g.name() + "'");
  std::map<std::string, size_t> where(v->tensors.begin(), v->tensors.end());
  std::vector<uint32_t> ids;
  const auto lts = derive_lifetimes(g, base_alignment, 0, &ids);
  MemoryPlan mine = p.plan;  // same chunks; placements re-indexed to g's tensors
  mine.placements.clear();
  std::vector<BufferRange> placed(g.tensors().size());
  for (size_t i = 0; i < lts.size(); ++i) {
    auto it = where.find(lts[i].name);
    if (it == where.end())
      fail("graph '" + g.name() + "': tensor '" + lts[i].name + "' is not in the plan of '" + variant + "'");
    const TensorLifetime& planned = p.lifetimes[it->second];
    if (lts[i].bytes > planned.bytes)
      fail("graph '" + g.name() + "': tensor '" + lts[i].name + "' needs " + std::to_string(lts[i].bytes) +
           " bytes; the plan of '" + variant + "' holds " + std::to_string(planned.bytes));
    const TensorPlacement& pl = p.plan.placements[it->second];
    mine.placements.push_back(pl);
    if (pl.buffer < arena.size()) placed[ids[i]] = BufferRange{arena[pl.buffer], pl.offset, lts[i].bytes};
  }
  const std::string bad = check_plan(lts, mine, max_buffer_bytes, base_alignment);
  if (!bad.empty()) fail("graph '" + g.name() + "' does not fit the plan of '" + variant + "': " + bad);
  if (!arena.empty())
    for (size_t i = 0; i < lts.size(); ++i)
      if (placed[ids[i]].buffer == VK_NULL_HANDLE)
        fail("tensor '" + lts[i].name + "' is placed in a chunk that was not allocated");
  return placed;
}

void record_graph(const Graph& g, const std::vector<BufferRange>& placed, Program& program) {
  const GraphBinding b(g, placed);
  std::vector<VkBuffer> arena;
  for (const BufferRange& r : placed)
    if (r.buffer != VK_NULL_HANDLE && std::find(arena.begin(), arena.end(), r.buffer) == arena.end())
      arena.push_back(r.buffer);
  auto inside = [&](const Arg& a, const std::vector<TensorRef>& ts) {
    for (TensorRef t : ts) {
      if (!is_planned(g.at(t).role)) continue;
      const BufferRange& r = placed[t.id];
      if (r.buffer == a.range.buffer && a.range.offset >= r.offset &&
          a.range.offset + a.range.size <= r.offset + r.size)
        return true;
    }
    return false;
  };
  for (const GraphNode& n : g.nodes()) {
    if (!n.record) fail("node '" + n.label + "' of graph '" + g.name() + "' has nothing to record");
    const size_t before = program.op_count();
    n.record(program, b);
    // The derivation is only as good as the declarations: every arena range an op binds must lie in a
    // tensor the node declared (written ranges in a declared write), or the plan could overlap it.
    for (size_t op = before; op < program.op_count(); ++op)
      for (const Arg& a : program.op_args(op)) {
        if (std::find(arena.begin(), arena.end(), a.range.buffer) == arena.end()) continue;
        const bool writes = a.access != Access::read;
        if (!inside(a, writes ? n.writes : n.reads) && !(writes ? false : inside(a, n.writes)))
          fail("node '" + n.label + "' of graph '" + g.name() + "' binds arena bytes [" +
               std::to_string(a.range.offset) + ", +" + std::to_string(a.range.size) +
               ") outside the tensors it declared " + (writes ? "written" : "read"));
      }
    if (n.group_end) program.checkpoint();
  }
}

}  // namespace diffvk
