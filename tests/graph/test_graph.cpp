// The forward graph's derivation (runtime/graph/graph.hpp), without a device: lifetimes derived from
// random op sequences cover every real use, live tensors never overlap, the plan is the planner's own
// for those lifetimes, and the plan follows a recipe when an op is added or removed.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "diffvk/error.hpp"
#include "graph/graph.hpp"

using namespace diffvk;

namespace {

constexpr uint64_t kAlign = 64, kMaxBuffer = 1 << 20;

// A random graph: planned tensors of every planned role, some bound ones, and nodes that read what earlier
// nodes wrote and write new or existing tensors.
Graph random_graph(std::mt19937& rng, const std::string& name, int nodes) {
  Graph g(name);
  std::vector<TensorRef> written;  // readable
  auto pick = [&](uint32_t n) { return uint32_t(rng() % n); };
  const int inputs = 1 + int(pick(3));
  for (int i = 0; i < inputs; ++i)
    written.push_back(g.tensor("in" + std::to_string(i), TensorRole::input, ElemType::f16, {1 + pick(64), 8}));
  written.push_back(g.bind("w", TensorRole::weight, ElemType::f16, {16, 16}, {}));
  int fresh = 0;
  for (int n = 0; n < nodes; ++n) {
    std::vector<TensorRef> reads, writes;
    const uint32_t nr = 1 + pick(3);
    for (uint32_t r = 0; r < nr; ++r) reads.push_back(written[pick(uint32_t(written.size()))]);
    const uint32_t nw = 1 + pick(2);
    for (uint32_t w = 0; w < nw; ++w) {
      const uint32_t kind = pick(10);
      if (kind < 6 || written.size() < 3) {  // a new tensor
        const TensorRole role = kind == 0   ? TensorRole::output
                                : kind == 1 ? TensorRole::scratch
                                            : TensorRole::activation;
        const std::string tn = "t" + std::to_string(fresh++);
        writes.push_back(role == TensorRole::scratch ? g.scratch(tn, 4 + pick(5000))
                                                     : g.tensor(tn, role, pick(2) ? ElemType::f32 : ElemType::f16,
                                                                {1 + pick(300), 1 + pick(4)}));
      } else {  // an existing planned tensor (in place, like the residual stream)
        const TensorRef t = written[pick(uint32_t(written.size()))];
        if (g.at(t).role != TensorRole::weight) writes.push_back(t);
      }
    }
    if (writes.empty())
      writes.push_back(g.tensor("t" + std::to_string(fresh++), TensorRole::activation, ElemType::f32, {7}));
    g.add("op" + std::to_string(n), reads, writes);
    for (TensorRef t : writes)
      if (g.at(t).role != TensorRole::scratch) written.push_back(t);
  }
  // Every planned tensor is used (derive_lifetimes refuses unused memory): an op that reads the leftovers.
  std::vector<TensorRef> unused;
  for (uint32_t i = 0; i < g.tensors().size(); ++i) {
    const bool used = std::any_of(g.nodes().begin(), g.nodes().end(), [&](const GraphNode& nd) {
      auto has = [&](const std::vector<TensorRef>& v) {
        return std::any_of(v.begin(), v.end(), [&](TensorRef t) { return t.id == i; });
      };
      return has(nd.reads) || has(nd.writes);
    });
    if (!used && is_planned(g.tensors()[i].role)) unused.push_back(TensorRef{i});
  }
  if (!unused.empty()) g.add("sink", unused, {g.tensor("sink", TensorRole::output, ElemType::f32, {1})});
  return g;
}

// The real uses of tensor id, by brute force: every node index that reads or writes it.
std::vector<int> uses(const Graph& g, uint32_t id) {
  std::vector<int> u;
  for (size_t n = 0; n < g.nodes().size(); ++n) {
    const GraphNode& nd = g.nodes()[n];
    for (const auto* v : {&nd.reads, &nd.writes})
      for (TensorRef t : *v)
        if (t.id == id) u.push_back(int(n));
  }
  return u;
}

}  // namespace

TEST_CASE("graph: derived lifetimes cover every real use, live tensors never overlap, the plan is the planner's") {
  std::mt19937 rng(20261125);
  for (int trial = 0; trial < 200; ++trial) {
    const Graph g = random_graph(rng, "g", 1 + int(rng() % 40));
    std::vector<uint32_t> ids;
    const auto lts = derive_lifetimes(g, kAlign, 0, &ids);
    REQUIRE(lts.size() == ids.size());
    const int last_node = int(g.nodes().size()) - 1;
    for (size_t i = 0; i < lts.size(); ++i) {
      const GraphTensor& t = g.tensors()[ids[i]];
      CHECK(lts[i].name == t.name);
      CHECK(lts[i].bytes == t.bytes);
      for (int u : uses(g, ids[i])) {  // never shorter than the real use
        CHECK(lts[i].first_step <= u);
        CHECK(u <= lts[i].last_step);
      }
      if (t.role == TensorRole::input) CHECK(lts[i].first_step == 0);
      if (t.role == TensorRole::output) CHECK(lts[i].last_step == last_node);
      if (t.role != TensorRole::input && t.role != TensorRole::output) {  // and no longer either
        const auto u = uses(g, ids[i]);
        CHECK(lts[i].first_step == *std::min_element(u.begin(), u.end()));
        CHECK(lts[i].last_step == *std::max_element(u.begin(), u.end()));
      }
    }
    const GraphPlan p = plan_graphs({&g}, kMaxBuffer, kAlign);
    CHECK(check_plan(p.lifetimes, p.plan, kMaxBuffer, kAlign).empty());
    // The plan is exactly the planner's for the derived lifetimes (the graph adds nothing of its own).
    const MemoryPlan direct = plan_memory(lts, kMaxBuffer, kAlign);
    REQUIRE(direct.placements.size() == p.plan.placements.size());
    CHECK(direct.arena_bytes == p.plan.arena_bytes);
    CHECK(direct.lower_bound == p.plan.lower_bound);
    for (size_t i = 0; i < lts.size(); ++i)
      CHECK(direct.placements[i].arena_offset == p.plan.placements[i].arena_offset);
    // Semantic check, independent of TensorLifetime: two tensors one node touches never share a byte.
    for (const GraphNode& nd : g.nodes()) {
      std::vector<size_t> touched;
      for (const auto* v : {&nd.reads, &nd.writes})
        for (TensorRef t : *v) {
          const auto it = std::find(ids.begin(), ids.end(), t.id);
          if (it != ids.end()) touched.push_back(size_t(it - ids.begin()));
        }
      for (size_t a : touched)
        for (size_t b : touched) {
          if (a == b) continue;
          const auto &pa = p.plan.placements[a], &pb = p.plan.placements[b];
          const bool overlap =
              pa.buffer == pb.buffer && pa.offset < pb.offset + lts[b].bytes && pb.offset < pa.offset + lts[a].bytes;
          CHECK_FALSE(overlap);
        }
    }
  }
}

TEST_CASE("graph: variants share one arena, and a smaller instance fits its variant") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    std::mt19937 a_rng(rng()), b_rng(rng());
    const Graph a = random_graph(a_rng, "a", 1 + int(rng() % 30)), b = random_graph(b_rng, "b", 1 + int(rng() % 30));
    const GraphPlan p = plan_graphs({&a, &b}, kMaxBuffer, kAlign);
    CHECK(check_plan(p.lifetimes, p.plan, kMaxBuffer, kAlign).empty());
    const GraphPlan pa = plan_graphs({&a}, kMaxBuffer, kAlign), pb = plan_graphs({&b}, kMaxBuffer, kAlign);
    CHECK(p.plan.lower_bound == std::max(pa.plan.lower_bound, pb.plan.lower_bound));  // timelines follow each other
    CHECK(p.plan.arena_bytes <= pa.plan.arena_bytes + pb.plan.arena_bytes);
    REQUIRE(p.variant("a"));
    CHECK(p.variant("b")->first_step == p.variant("a")->last_step + 1);
    // The same graph fits its own variant.
    CHECK_NOTHROW(fit_graph(a, p, "a", {}, kMaxBuffer, kAlign));
  }
}

namespace {
// A recipe in miniature (a norm, a projection, an in-place residual add), with an optional extra op.
Graph mini_recipe(uint32_t rows, bool extra_op) {
  Graph g("rows=" + std::to_string(rows));
  const TensorRef x = g.tensor("x", TensorRole::input, ElemType::f32, {rows, 64});
  const TensorRef w = g.bind("w", TensorRole::weight, ElemType::f16, {64, 64}, {});
  const TensorRef xn = g.tensor("xn", TensorRole::activation, ElemType::f16, {rows, 64});
  g.add("norm", {x}, {xn});
  TensorRef h = g.tensor("h", TensorRole::activation, ElemType::f16, {rows, 256});
  g.add("up", {xn, w}, {h});
  if (extra_op) {  // e.g. an activation function: one more tensor, nothing else edited
    const TensorRef a = g.tensor("act", TensorRole::activation, ElemType::f16, {rows, 256});
    g.add("act", {h}, {a});
    h = a;
  }
  g.add("down", {h, w, x}, {x});
  const TensorRef y = g.tensor("y", TensorRole::output, ElemType::f32, {rows, 64});
  g.add("copy out", {x}, {y});
  return g;
}
}  // namespace

TEST_CASE("graph: adding or removing an op changes the plan with no other edit") {
  for (bool extra : {false, true}) {
    const Graph g = mini_recipe(32, extra);
    const GraphPlan p = plan_graphs({&g}, kMaxBuffer, kAlign);
    INFO(format_plan(p.lifetimes, p.plan));
    CHECK(check_plan(p.lifetimes, p.plan, kMaxBuffer, kAlign).empty());
    CHECK(p.plan.arena_bytes == p.plan.lower_bound);  // this small chain reaches the bound
    CHECK((p.variant("rows=32")->tensors.size() == (extra ? 5u : 4u)));
    CHECK(p.variant("rows=32")->last_step == (extra ? 4 : 3));
    // Fewer rows fit the planned variant; more rows do not.
    CHECK_NOTHROW(fit_graph(mini_recipe(5, extra), p, "rows=32", {}, kMaxBuffer, kAlign));
    CHECK_THROWS_AS(fit_graph(mini_recipe(33, extra), p, "rows=32", {}, kMaxBuffer, kAlign), Error);
  }
  // A graph with an op the plan did not see: its longer lifetimes are caught by fit_graph, not run.
  const Graph planned = mini_recipe(32, false);
  const GraphPlan p = plan_graphs({&planned}, kMaxBuffer, kAlign);
  Graph changed = mini_recipe(32, false);
  changed.add("late read", {changed.find("xn")}, {changed.find("y")});  // xn now lives to the end
  bool refused = false;
  try {
    fit_graph(changed, p, "rows=32", {}, kMaxBuffer, kAlign);
  } catch (const Error& e) {
    refused = e.status() == Status::internal;
  }
  CHECK(refused == (p.plan.placements[1].offset < p.plan.placements[3].offset + 32 * 64 * 4 &&
                    p.plan.placements[3].offset <
                        p.plan.placements[1].offset + 32 * 64 * 2));  // refused exactly when xn and y share bytes
}

TEST_CASE("graph: recipe mistakes are errors, not silent plans") {
  Graph g("bad");
  const TensorRef a = g.tensor("a", TensorRole::activation, ElemType::f32, {4});
  const TensorRef w = g.bind("w", TensorRole::weight, ElemType::f16, {4}, {});
  CHECK_THROWS_AS(g.add("reads before any write", {a}, {g.tensor("b", TensorRole::activation, ElemType::f32, {4})}),
                  Error);
  CHECK_THROWS_AS(g.add("writes a weight", {}, {w}), Error);
  CHECK_THROWS_AS(g.tensor("a", TensorRole::activation, ElemType::f32, {4}), Error);  // duplicate name
  CHECK_THROWS_AS(g.tensor("zero", TensorRole::activation, ElemType::f32, {0}), Error);
  CHECK_THROWS_AS(g.bind("planned", TensorRole::activation, ElemType::f32, {4}, {}), Error);
  Graph unused("unused");
  unused.tensor("never", TensorRole::activation, ElemType::f32, {4});
  CHECK_THROWS_AS(derive_lifetimes(unused, kAlign), Error);
  Graph ok("ok");
  const TensorRef s = ok.scratch("s", 16);
  CHECK_NOTHROW(ok.add("scratch is read and written by its op", {s}, {s}));
}
