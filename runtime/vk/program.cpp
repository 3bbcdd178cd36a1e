#include "vk/program.hpp"

#include <algorithm>

namespace diffvk {

bool ranges_overlap(const BufferRange& a, const BufferRange& b) {
  return a.buffer == b.buffer && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

std::vector<BarrierSpec> plan_barriers(const std::vector<OpAccesses>& ops) {
  struct Pending {
    BufferRange range;
    OpStage stage;
  };
  std::vector<Pending> writes, reads;  // since the last barrier that covered them
  std::vector<BarrierSpec> out(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) {
    BarrierSpec& b = out[i];
    const auto bit = [](OpStage s) { return 1u << static_cast<unsigned>(s); };
    std::vector<bool> flush_w(writes.size(), false);
    for (const Arg& a : ops[i].args) {
      for (size_t w = 0; w < writes.size(); ++w)  // RAW or WAW
        if (ranges_overlap(a.range, writes[w].range)) flush_w[w] = true;
      if (a.access != Access::read)
        for (const auto& r : reads)  // WAR: execution dependency only
          if (ranges_overlap(a.range, r.range)) {
            b.needed = true;
            b.src_stages |= bit(r.stage);
          }
    }
    for (size_t w = 0; w < writes.size(); ++w)
      if (flush_w[w]) {
        b.needed = true;
        b.src_stages |= bit(writes[w].stage);
        b.flush.push_back(writes[w].range);
        b.flush_stage.push_back(writes[w].stage);
      }
    if (b.needed) {
      // The barrier orders every earlier op of the source stages: their reads are done,
      // and the flushed writes are visible. Unflushed writes stay pending for a later reader.
      std::vector<Pending> keep;
      for (size_t w = 0; w < writes.size(); ++w)
        if (!flush_w[w]) keep.push_back(writes[w]);
      writes.swap(keep);
      reads.erase(
          std::remove_if(reads.begin(), reads.end(), [&](const Pending& r) { return b.src_stages & bit(r.stage); }),
          reads.end());
    }
    for (const Arg& a : ops[i].args) {
      if (a.access != Access::write) reads.push_back({a.range, ops[i].stage});
      if (a.access != Access::read) writes.push_back({a.range, ops[i].stage});
    }
  }
  return out;
}

namespace {
VkPipelineStageFlags vk_stage(OpStage s) {
  return s == OpStage::compute ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : VK_PIPELINE_STAGE_TRANSFER_BIT;
}
VkAccessFlags write_access(OpStage s) {
  return s == OpStage::compute ? VK_ACCESS_SHADER_WRITE_BIT : VK_ACCESS_TRANSFER_WRITE_BIT;
}
VkAccessFlags rw_access(OpStage s) {
  return s == OpStage::compute ? (VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT)
                               : (VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
}
}  // namespace

Program::Program(Device& device, std::string name, bool timestamps)
    : device_(device), name_(std::move(name)), timestamps_(timestamps && device.caps().timestamps) {}

Program::~Program() {
  VkDevice dev = device_.handle();
  if (!cbs_.empty()) vkFreeCommandBuffers(dev, cmd_pool_, static_cast<uint32_t>(cbs_.size()), cbs_.data());
  if (cmd_pool_) vkDestroyCommandPool(dev, cmd_pool_, nullptr);
  if (fence_) vkDestroyFence(dev, fence_, nullptr);
  if (pool_) vkDestroyDescriptorPool(dev, pool_, nullptr);
  if (queries_) vkDestroyQueryPool(dev, queries_, nullptr);
}

void Program::check_range(const BufferRange& r, const std::string& what, bool storage) const {
  const DeviceCaps& c = device_.caps();
  if (!r.buffer || r.size == 0) throw Error(Status::internal, name_ + "/" + what + ": empty buffer range");
  if (storage && r.offset % c.min_storage_buffer_offset_alignment)
    throw Error(Status::internal, name_ + "/" + what + ": offset " + std::to_string(r.offset) +
                                      " not aligned to minStorageBufferOffsetAlignment");
  if (storage && r.size > c.max_storage_buffer_range)
    throw Error(Status::unsupported, name_ + "/" + what + ": binding of " + std::to_string(r.size) +
                                         " bytes exceeds maxStorageBufferRange " +
                                         std::to_string(c.max_storage_buffer_range));
}

void Program::dispatch(const Pipeline& pipeline, std::vector<Arg> args, const void* push, uint32_t push_bytes,
                       std::array<uint32_t, 3> groups, std::string label) {
  add_dispatch(pipeline.desc(), pipeline.name(), &pipeline, nullptr, std::move(args), push, push_bytes, groups,
               std::move(label));
}

void Program::dispatch(const LazyPipeline& pipeline, std::vector<Arg> args, const void* push, uint32_t push_bytes,
                       std::array<uint32_t, 3> groups, std::string label) {
  add_dispatch(pipeline.desc(), pipeline.name(), nullptr, &pipeline, std::move(args), push, push_bytes, groups,
               std::move(label));
}

void Program::add_dispatch(const PipelineDesc& desc, const std::string& name, const Pipeline* pipeline,
                           const LazyPipeline* lazy, std::vector<Arg> args, const void* push, uint32_t push_bytes,
                           std::array<uint32_t, 3> groups, std::string label) {
  if (finalized_) throw Error(Status::internal, name_ + ": dispatch added after recording");
  if (label.empty()) label = name;
  if (args.size() != desc.bindings)
    throw Error(Status::internal, name_ + "/" + label + ": " + std::to_string(args.size()) + " buffers for " +
                                      std::to_string(desc.bindings) + " bindings");
  if (push_bytes != desc.push_bytes)
    throw Error(Status::internal, name_ + "/" + label + ": push-constant size mismatch");
  for (size_t i = 0; i < args.size(); ++i) check_range(args[i].range, label + " binding " + std::to_string(i), true);
  for (int d = 0; d < 3; ++d)
    if (groups[d] == 0 || groups[d] > device_.caps().max_workgroup_count[d])
      throw Error(Status::unsupported, name_ + "/" + label + ": workgroup count " + std::to_string(groups[d]) +
                                           " outside the device limit in dimension " + std::to_string(d));
  Op op{OpStage::compute, pipeline, lazy, std::move(args), {}, groups, std::move(label)};
  op.push.assign(static_cast<const uint8_t*>(push), static_cast<const uint8_t*>(push) + push_bytes);
  ops_.push_back(std::move(op));
}

void Program::copy(BufferRange src, BufferRange dst, std::string label) {
  if (finalized_) throw Error(Status::internal, name_ + ": copy added after recording");
  check_range(src, "copy source", false);
  check_range(dst, "copy destination", false);
  if (src.size != dst.size) throw Error(Status::internal, name_ + ": copy size mismatch");
  ops_.push_back(Op{OpStage::transfer,
                    nullptr,
                    nullptr,
                    {{src, Access::read}, {dst, Access::write}},
                    {},
                    {},
                    label.empty() ? "copy" : label});
}

void Program::checkpoint() {
  if (finalized_) throw Error(Status::internal, name_ + ": checkpoint added after recording");
  if (group_starts_.back() != ops_.size()) group_starts_.push_back(ops_.size());  // no empty groups
}

std::vector<const Pipeline*> Program::pipelines() const {
  std::vector<const Pipeline*> out;
  for (const Op& op : ops_)
    if (op.pipeline && std::find(out.begin(), out.end(), op.pipeline) == out.end()) out.push_back(op.pipeline);
  return out;
}

std::vector<const LazyPipeline*> Program::pending_pipelines() const {
  std::vector<const LazyPipeline*> out;
  for (const Op& op : ops_)
    if (op.lazy && !op.lazy->built() && std::find(out.begin(), out.end(), op.lazy) == out.end()) out.push_back(op.lazy);
  return out;
}

void Program::finalize() {
  if (finalized_) return;
  device_.require_execution("program '" + name_ + "'");
  device_.check_not_lost();
  // The LazyPipelines this program dispatches, compiled together (several threads) before anything is recorded.
  std::vector<const LazyPipeline*> lazy;
  for (const Op& op : ops_)
    if (op.lazy) lazy.push_back(op.lazy);
  device_.build_pipelines(lazy);
  for (Op& op : ops_)
    if (op.lazy) op.pipeline = &op.lazy->get();
  VkDevice dev = device_.handle();
  uint32_t n_sets = 0, n_desc = 0;
  for (auto& op : ops_)
    if (op.pipeline) {
      ++n_sets;
      n_desc += static_cast<uint32_t>(op.args.size());
    }
  std::vector<VkDescriptorSet> sets;
  if (n_sets) {
    VkDescriptorPoolSize ps{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(n_desc, 1u)};
    VkDescriptorPoolCreateInfo pci{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    pci.maxSets = n_sets;
    pci.poolSizeCount = 1;
    pci.pPoolSizes = &ps;
    DVK_CHECK(vkCreateDescriptorPool(dev, &pci, nullptr, &pool_));
    std::vector<VkDescriptorSetLayout> layouts;
    for (auto& op : ops_)
      if (op.pipeline) layouts.push_back(op.pipeline->set_layout());
    sets.resize(n_sets);
    VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    ai.descriptorPool = pool_;
    ai.descriptorSetCount = n_sets;
    ai.pSetLayouts = layouts.data();
    DVK_CHECK(vkAllocateDescriptorSets(dev, &ai, sets.data()));
    std::vector<VkDescriptorBufferInfo> infos;
    infos.reserve(n_desc);
    std::vector<VkWriteDescriptorSet> writes;
    size_t s = 0;
    for (auto& op : ops_) {
      if (!op.pipeline) continue;
      for (uint32_t b = 0; b < op.args.size(); ++b) {
        infos.push_back({op.args[b].range.buffer, op.args[b].range.offset, op.args[b].range.size});
        VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
        w.dstSet = sets[s];
        w.dstBinding = b;
        w.descriptorCount = 1;
        w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w.pBufferInfo = &infos.back();
        writes.push_back(w);
      }
      ++s;
    }
    vkUpdateDescriptorSets(dev, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  }
  if (timestamps_) {
    VkQueryPoolCreateInfo qci{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qci.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qci.queryCount = static_cast<uint32_t>(ops_.size() + 1);
    DVK_CHECK(vkCreateQueryPool(dev, &qci, nullptr, &queries_));
  }

  // This program's own command pool and fence (externally synchronised objects: not shared).
  VkCommandPoolCreateInfo cpci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  cpci.queueFamilyIndex = device_.queue_family();
  DVK_CHECK(vkCreateCommandPool(dev, &cpci, nullptr, &cmd_pool_));
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  DVK_CHECK(vkCreateFence(dev, &fci, nullptr, &fence_));
  if (group_starts_.size() > 1 && group_starts_.back() == ops_.size()) group_starts_.pop_back();
  cbs_.assign(group_starts_.size(), VK_NULL_HANDLE);
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = cmd_pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = static_cast<uint32_t>(cbs_.size());
  DVK_CHECK(vkAllocateCommandBuffers(dev, &cai, cbs_.data()));
  const uint32_t nq = static_cast<uint32_t>(ops_.size() + 1);
  // Order a group after everything submitted before it (uploads, earlier programs, earlier replays,
  // and this program's earlier groups, which ran in earlier submissions).
  auto order_after_earlier = [](VkCommandBuffer cb) {
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                       VK_ACCESS_TRANSFER_WRITE_BIT;
    const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
    vkCmdPipelineBarrier(cb, st, st, 0, 1, &mb, 0, nullptr, 0, nullptr);
  };
  std::vector<OpAccesses> acc;
  for (auto& op : ops_) acc.push_back({op.stage, op.args});
  const auto plan = plan_barriers(acc);
  size_t s = 0;
  for (size_t g = 0; g < cbs_.size(); ++g) {
    VkCommandBuffer cb = cbs_[g];
    VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    DVK_CHECK(vkBeginCommandBuffer(cb, &bi));
    if (g == 0 && queries_) vkCmdResetQueryPool(cb, queries_, 0, nq);
    order_after_earlier(cb);
    if (g == 0 && queries_) vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries_, 0);
    const size_t end = g + 1 < cbs_.size() ? group_starts_[g + 1] : ops_.size();
    for (size_t i = group_starts_[g]; i < end; ++i) {
      const Op& op = ops_[i];
      const BarrierSpec& b = plan[i];
      if (b.needed) {
        VkPipelineStageFlags src = 0;
        for (OpStage st : {OpStage::compute, OpStage::transfer})
          if (b.src_stages & (1u << static_cast<unsigned>(st))) src |= vk_stage(st);
        std::vector<VkBufferMemoryBarrier> bmb;
        for (size_t k = 0; k < b.flush.size(); ++k) {
          VkBufferMemoryBarrier m{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
          m.srcAccessMask = write_access(b.flush_stage[k]);
          m.dstAccessMask = rw_access(op.stage);
          m.srcQueueFamilyIndex = m.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
          m.buffer = b.flush[k].buffer;
          m.offset = b.flush[k].offset;
          m.size = b.flush[k].size;
          bmb.push_back(m);
        }
        vkCmdPipelineBarrier(cb, src, vk_stage(op.stage), 0, 0, nullptr, static_cast<uint32_t>(bmb.size()), bmb.data(),
                             0, nullptr);
        ++barriers_;
      }
      if (op.pipeline) {
        vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, op.pipeline->handle());
        vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, op.pipeline->layout(), 0, 1, &sets[s++], 0,
                                nullptr);
        if (!op.push.empty())
          vkCmdPushConstants(cb, op.pipeline->layout(), VK_SHADER_STAGE_COMPUTE_BIT, 0,
                             static_cast<uint32_t>(op.push.size()), op.push.data());
        vkCmdDispatch(cb, op.groups[0], op.groups[1], op.groups[2]);
      } else {
        VkBufferCopy region{op.args[0].range.offset, op.args[1].range.offset, op.args[0].range.size};
        vkCmdCopyBuffer(cb, op.args[0].range.buffer, op.args[1].range.buffer, 1, &region);
      }
      if (queries_)
        vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries_, static_cast<uint32_t>(i + 1));
    }
    // Make every result visible to the host after the fence wait.
    VkMemoryBarrier mb{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    mb.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    mb.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, nullptr, 0, nullptr);
    DVK_CHECK(vkEndCommandBuffer(cb));
  }
  finalized_ = true;
}

void Program::run(const std::function<bool()>& should_abort) {
  finalize();
  have_stamps_ = false;
  if (!should_abort) {
    device_.submit_and_wait(cbs_.data(), static_cast<uint32_t>(cbs_.size()), fence_);
  } else {
    for (VkCommandBuffer cb : cbs_) {
      if (should_abort()) throw Error(Status::cancelled, name_ + ": cancelled by the abort callback");
      device_.submit_and_wait(&cb, 1, fence_);
    }
  }
  have_stamps_ = false;
  if (queries_) {
    const uint32_t nq = static_cast<uint32_t>(ops_.size() + 1);
    stamps_.assign(nq, 0);
    DVK_CHECK(vkGetQueryPoolResults(device_.handle(), queries_, 0, nq, nq * sizeof(uint64_t), stamps_.data(),
                                    sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    have_stamps_ = true;
  }
}

std::vector<Program::Timing> Program::timings() const {
  std::vector<Timing> t;
  if (!have_stamps_) return t;
  const DeviceCaps& c = device_.caps();
  const uint64_t mask = c.timestamp_valid_bits >= 64 ? ~0ull : ((1ull << c.timestamp_valid_bits) - 1);
  for (size_t i = 0; i < ops_.size(); ++i) {
    const uint64_t d = (stamps_[i + 1] - stamps_[i]) & mask;
    t.push_back({ops_[i].label, static_cast<double>(d) * c.timestamp_period_ns * 1e-3});
  }
  return t;
}

double Program::total_us() const {
  if (!have_stamps_) return 0;
  const DeviceCaps& c = device_.caps();
  const uint64_t mask = c.timestamp_valid_bits >= 64 ? ~0ull : ((1ull << c.timestamp_valid_bits) - 1);
  return static_cast<double>((stamps_.back() - stamps_.front()) & mask) * c.timestamp_period_ns * 1e-3;
}

}  // namespace diffvk
