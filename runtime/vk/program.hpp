// A recorded sequence of compute dispatches (and copies): recorded once, replayed many times.
// Barriers between dependent operations are computed exactly from each operation's declared
// buffer accesses (read-after-write, write-after-write: memory barrier on the written ranges;
// write-after-read: execution dependency only); independent operations get none.
#pragma once
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "vk/gpu.hpp"

namespace diffvk {

enum class Access { read, write, read_write };
struct Arg {
  BufferRange range;
  Access access = Access::read;
};

enum class OpStage { compute, transfer };

// ---- pure barrier planning (unit-testable without a device) ----
struct OpAccesses {
  OpStage stage = OpStage::compute;
  std::vector<Arg> args;
};
struct BarrierSpec {
  bool needed = false;
  uint32_t src_stages = 0;           // OpStage bit set: 1 << compute, 1 << transfer
  std::vector<BufferRange> flush;    // written ranges that must be made visible (RAW / WAW)
  std::vector<OpStage> flush_stage;  // stage that wrote each flushed range
};
// One BarrierSpec per op: the barrier to record before that op.
std::vector<BarrierSpec> plan_barriers(const std::vector<OpAccesses>& ops);
bool ranges_overlap(const BufferRange& a, const BufferRange& b);

// Threading: a Program owns its command pool, command buffer, descriptor sets and fence, so
// different Programs (e.g. of different sessions) may be finalized and run on different threads at
// once; one Program is used by one thread at a time. Submission goes through the device's queue lock.
class Program {
 public:
  Program(Device& device, std::string name, bool timestamps = false);
  ~Program();
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  // Adds a dispatch. args[i] binds to binding i; push must be exactly the pipeline's push block.
  void dispatch(const Pipeline& pipeline, std::vector<Arg> args, const void* push, uint32_t push_bytes,
                std::array<uint32_t, 3> groups, std::string label = {});
  // Same with a LazyPipeline, which need not be compiled yet: finalize() compiles the program's uncompiled ones
  // together (Device::build_pipelines) before recording. It must outlive the program.
  void dispatch(const LazyPipeline& pipeline, std::vector<Arg> args, const void* push, uint32_t push_bytes,
                std::array<uint32_t, 3> groups, std::string label = {});
  void copy(BufferRange src, BufferRange dst, std::string label = {});

  // Ends a group of operations: finalize() records one command buffer per group. run() without an
  // abort check submits them all at once; with one, it submits group by group and asks in between.
  void checkpoint();

  // Compiles the program's LazyPipelines not compiled yet (Device::build_pipelines), then records the command
  // buffers; implicitly done by the first run. A pipeline that fails to compile is thrown (Error naming it) and
  // nothing is recorded: a later finalize() or run() tries again.
  void finalize();
  // Submit and wait; host-visible results are readable afterwards. `should_abort` (optional) is asked
  // before every group; when it returns true, run() waits for the groups already submitted and throws
  // Error(cancelled): the program's results are then incomplete (callers restore their own state).
  void run(const std::function<bool()>& should_abort = {});
  size_t group_count() const { return group_starts_.size(); }

  struct Timing {
    std::string label;
    double us = 0;
  };
  // Per-operation GPU time of the last run (consecutive timestamps) and the whole program; empty without timestamps.
  std::vector<Timing> timings() const;
  double total_us() const;
  size_t op_count() const { return ops_.size(); }
  // The buffer arguments of operation i (what the graph recorder checks against a node's declared tensors).
  const std::vector<Arg>& op_args(size_t i) const { return ops_.at(i).args; }
  size_t barrier_count() const { return barriers_; }
  // The distinct compute pipelines its dispatches use, in order of first dispatch (a LazyPipeline's once finalized).
  std::vector<const Pipeline*> pipelines() const;
  // The LazyPipelines its dispatches use that are not compiled yet (what finalize() compiles), in order of first
  // dispatch; the self-test compiles several cases' at once (bench/selftest.cpp).
  std::vector<const LazyPipeline*> pending_pipelines() const;
  const std::string& name() const { return name_; }

 private:
  struct Op {
    OpStage stage;
    const Pipeline* pipeline = nullptr;  // compute: set by dispatch, or from lazy by finalize()
    const LazyPipeline* lazy = nullptr;  // a dispatch of a LazyPipeline
    std::vector<Arg> args;
    std::vector<uint8_t> push;
    std::array<uint32_t, 3> groups{};
    std::string label;
  };
  void check_range(const BufferRange& r, const std::string& what, bool storage) const;
  void add_dispatch(const PipelineDesc& desc, const std::string& name, const Pipeline* pipeline,
                    const LazyPipeline* lazy, std::vector<Arg> args, const void* push, uint32_t push_bytes,
                    std::array<uint32_t, 3> groups, std::string label);

  Device& device_;
  std::string name_;
  bool timestamps_;
  std::vector<Op> ops_;
  bool finalized_ = false;
  size_t barriers_ = 0;
  VkCommandPool cmd_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  std::vector<size_t> group_starts_{0};  // first op of each group
  std::vector<VkCommandBuffer> cbs_;     // one per group
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkQueryPool queries_ = VK_NULL_HANDLE;
  std::vector<uint64_t> stamps_;
  bool have_stamps_ = false;
};

}  // namespace diffvk
