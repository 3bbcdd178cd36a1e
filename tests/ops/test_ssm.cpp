// Conformance of the Mamba-1 kernels of Phi-4-mini-flash (SambaY): the causal depthwise conv1d with its rolling
// state (shaders/conv1d_state.comp) and the selective scan (shaders/selective_scan.comp: one dispatch, and the
// chunked parallel prefill), through their case tables (bench/cases/conv1d_state.cpp, selective_scan.cpp) against
// the float64 reference (runtime/reference/ssm_ref.*); the mixer's conv and scan chained as a session runs them (a
// chunked prefill program, then one decode program recorded once and replayed per token, the states carried); the
// argument checks and the pure chunk choice.
#include <doctest/doctest.h>

#include "bench/op_run_impl.hpp"
#include "op_table.hpp"
#include "ops/conv1d_state.hpp"
#include "ops/selective_scan.hpp"
#include "reference/ssm_ref.hpp"
#include "status_of.hpp"

using namespace diffvk;

TEST_CASE("conv1d_state: case table fp32") { test::run_op_table("conv1d_state", Precision::fp32); }
TEST_CASE("conv1d_state: case table fp16") { test::run_op_table("conv1d_state", Precision::fp16); }
TEST_CASE("selective_scan: case table fp32") { test::run_op_table("selective_scan", Precision::fp32); }
TEST_CASE("selective_scan: case table fp16") { test::run_op_table("selective_scan", Precision::fp16); }

TEST_CASE("conv1d_state: rows per block") {
  CHECK(conv1d_rows_per_block(1) == 1);
  CHECK(conv1d_rows_per_block(64) == 64);
  CHECK(conv1d_rows_per_block(65) == 32);
  CHECK(conv1d_rows_per_block(512) == 32);
  CHECK(conv1d_rows_per_block(512) >= Conv1dStateKernel::kMaxWidth - 1);
}

TEST_CASE("selective_scan: chunk choice") {
  CHECK(choose_scan_chunk(1) == 0);
  CHECK(choose_scan_chunk(32) == 0);
  CHECK(choose_scan_chunk(33) == 32);
  CHECK(choose_scan_chunk(512) == 32);
  SelectiveScanParams p;
  p.T = 512, p.C = 5120, p.S = 16;
  CHECK(scan_chunk(p) == 32);
  CHECK(selective_scan_scratch_bytes(p) == uint64_t(16) * 5120 * 17 * 4);
  p.chunk = 4, p.T = 13;
  CHECK(scan_chunk(p) == 4);
  CHECK(SelectiveScanKernel::choice(p) == "chunked L=4 x 4");
  p.chunk = 13;  // one chunk: one dispatch, no scratch
  CHECK(scan_chunk(p) == 0);
  CHECK(selective_scan_scratch_bytes(p) == 0);
  p.T = 1, p.chunk = 0;
  CHECK(SelectiveScanKernel::choice(p) == "one dispatch");
}

TEST_CASE("conv1d_state: bad arguments throw invalid_argument") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  CHECK(test::status_of([&] { Conv1dStateKernel(dev, KernelOptions::for_device(dev), 1); }) ==
        Status::invalid_argument);
  CHECK(test::status_of([&] { Conv1dStateKernel(dev, KernelOptions::for_device(dev), 9); }) ==
        Status::invalid_argument);
  const Conv1dStateKernel k(dev, KernelOptions::for_device(dev), 4);
  Buffer buf(dev, 1 << 16, MemoryDomain::device, "conv1d_state args");
  const BufferRange big = buf.range(0, 1 << 14), small = buf.range(1 << 14, 64);
  Program prog(dev, "conv1d_state args");
  auto status = [&](Conv1dStateParams p, BufferRange x, BufferRange state) {
    return test::status_of([&] { k.record(prog, p, x, big, BufferRange{}, state, big); });
  };
  Conv1dStateParams good;
  good.T = 3, good.C = 16, good.x_stride = 32;
  CHECK(status(good, big, big) == Status::ok);
  Conv1dStateParams p = good;
  p.T = 0;
  CHECK(status(p, big, big) == Status::invalid_argument);
  p = good, p.x_stride = 15;  // rows overlap
  CHECK(status(p, big, big) == Status::invalid_argument);
  CHECK(status(good, small, big) == Status::invalid_argument);  // x too small for 3 rows of stride 32
  p = good, p.rows_per_block = 2;  // blocks after the first would read the state the first one writes
  CHECK(status(p, big, big) == Status::invalid_argument);
  p.rows_per_block = 3;
  CHECK(status(p, big, big) == Status::ok);
  p.T = 2, p.rows_per_block = 1;  // blocks of 1 < K - 1
  CHECK(status(p, big, big) == Status::invalid_argument);
  p = good, p.C = 8;
  CHECK(status(p, big, small) == Status::invalid_argument);  // state 3 x 8 float32 = 96 bytes > 64
  p.C = 4;
  CHECK(status(p, big, small) == Status::ok);  // 3 x 4 float32 = 48 bytes
}

TEST_CASE("selective_scan: bad arguments throw invalid_argument") {
  auto ctx = test::make_context(Precision::fp32);
  Device& dev = ctx->device();
  CHECK(test::status_of([&] { SelectiveScanKernel(dev, KernelOptions::for_device(dev), 0); }) ==
        Status::invalid_argument);
  const SelectiveScanKernel k(dev, KernelOptions::for_device(dev), 16);
  Buffer buf(dev, 1 << 18, MemoryDomain::device, "selective_scan args");
  const BufferRange big = buf.range(0, 1 << 16), small = buf.range(1 << 16, 256);
  Program prog(dev, "selective_scan args");
  SelectiveScanBuffers good;
  good.u = good.delta_raw = good.A_log = good.bc = good.D = good.h = good.y = good.scratch = big;
  auto status = [&](SelectiveScanParams p, const SelectiveScanBuffers& b) {
    return test::status_of([&] { k.record(prog, p, b); });
  };
  SelectiveScanParams p;
  p.T = 40, p.C = 24, p.S = 16, p.bc_stride = 40, p.b_offset = 5, p.c_offset = 21;
  CHECK(status(p, good) == Status::ok);  // chunked: 2 chunks of 32
  SelectiveScanParams q = p;
  q.S = 8;  // the kernel's S is 16
  CHECK(status(q, good) == Status::invalid_argument);
  q = p, q.T = 0;
  CHECK(status(q, good) == Status::invalid_argument);
  SelectiveScanBuffers b = good;
  b.scratch = small;  // 2 x 24 x 17 x 4 bytes needed
  CHECK(status(p, b) == Status::invalid_argument);
  q = p, q.T = 1;  // one dispatch: no scratch needed
  CHECK(status(q, b) == Status::ok);
  b = good, b.h = small;  // 24 x 16 float32
  CHECK(status(p, b) == Status::invalid_argument);
  b = good, b.z = big;
  q = p, q.z_stride = 23;  // rows overlap
  CHECK(status(q, b) == Status::invalid_argument);
  b = good, b.bc = small;
  CHECK(status(p, b) == Status::invalid_argument);
}

namespace {
// The Mamba-1 mixer's conv and scan chained as a session runs them: a prefill program of T rows (the chunked scan,
// chunks of 4), run once, then a decode program of one row recorded once and replayed `steps` times with each
// token's rows uploaded in between; the conv state and h carried. Checked against one float64 reference call over
// all the rows (the conv output rounded to the storage type, as the device stores it) at the op tables' bounds.
void chained_mixer(Precision precision) {
  auto ctx = test::make_context_or_skip(precision);
  if (!ctx) return;
  Device& dev = ctx->device();
  using namespace bench::op_detail;
  const bool f16 = dev.fp16();
  const size_t es = storage_bytes(f16);
  const uint32_t C = 67, S = 16, K = 4, dt = 5, T = 9, steps = 5, rows = T + steps, bcs = dt + 2 * S;
  std::mt19937_64 rng(77);
  const auto inproj = rounded(uniform(rng, size_t(rows) * 2 * C, -3, 3), f16);  // [x | z] rows
  const auto dr = rounded(uniform(rng, size_t(rows) * C, -6, 1), f16);
  const auto bc = rounded(uniform(rng, size_t(rows) * bcs, -1, 1), f16);  // [dt_low | B | Cm] rows
  const auto w = rounded(uniform(rng, size_t(C) * K, -1, 1), f16), bias = rounded(uniform(rng, C, -1, 1), f16);
  auto a_log = uniform(rng, size_t(C) * S, 1, 16);
  for (double& v : a_log) v = std::log(v);
  a_log = ref::round_to_f32(a_log);
  const auto D = ref::round_to_f32(uniform(rng, C, -1, 1));
  const auto cs0 = ref::round_to_f32(uniform(rng, size_t(K - 1) * C, -3, 3));
  const auto h0 = ref::round_to_f32(uniform(rng, size_t(C) * S, -1, 1));

  // The reference: one call over all the rows.
  std::vector<double> x(size_t(rows) * C), z(size_t(rows) * C), B(size_t(rows) * S), Cm(size_t(rows) * S);
  for (uint32_t t = 0; t < rows; ++t) {
    for (uint32_t c = 0; c < C; ++c)
      x[size_t(t) * C + c] = inproj[size_t(t) * 2 * C + c], z[size_t(t) * C + c] = inproj[size_t(t) * 2 * C + C + c];
    for (uint32_t s = 0; s < S; ++s)
      B[size_t(t) * S + s] = bc[size_t(t) * bcs + dt + s], Cm[size_t(t) * S + s] = bc[size_t(t) * bcs + dt + S + s];
  }
  std::vector<double> cs = cs0, h = h0;
  const auto u = rounded(ref::causal_conv1d(x, int(rows), int(C), w, int(K), bias, cs, true), f16);
  const ref::ScanResult r = ref::selective_scan(u, dr, a_log, B, Cm, D, &z, int(rows), int(C), int(S), h);
  std::vector<double> expect = r.y;
  expect.insert(expect.end(), cs.begin(), cs.end());
  expect.insert(expect.end(), h.begin(), h.end());

  const Conv1dStateKernel conv(dev, KernelOptions::for_device(dev), K);
  const SelectiveScanKernel scan(dev, KernelOptions::for_device(dev), S);
  Arena a(dev);
  struct Call {  // one program's buffers (rows n)
    uint32_t n;
    VkDeviceSize ip, dr, bc, u, y;
  };
  Call calls[2];
  for (int i = 0; i < 2; ++i) {
    const uint32_t n = i == 0 ? T : 1;
    calls[i] = {n,
                a.take(size_t(n) * 2 * C * es),
                a.take(size_t(n) * C * es),
                a.take(size_t(n) * bcs * es),
                a.take(size_t(n) * C * es),
                a.take(size_t(n) * C * es)};
  }
  const VkDeviceSize wo = a.take(w.size() * es), bo = a.take(C * es), alo = a.take(a_log.size() * 4),
                     dof = a.take(C * 4), cso = a.take(cs0.size() * 4), ho = a.take(h0.size() * 4);
  SelectiveScanParams sp;
  sp.T = T, sp.C = C, sp.S = S, sp.bc_stride = bcs, sp.b_offset = dt, sp.c_offset = dt + S, sp.z_stride = 2 * C,
  sp.z_offset = C, sp.chunk = 4;
  const VkDeviceSize scb = selective_scan_scratch_bytes(sp), sco = a.take(scb);
  a.create(dev, "chained mixer");
  a.buf->upload(wo, pack(w, f16).data(), w.size() * es);
  a.buf->upload(bo, pack(bias, f16).data(), C * es);
  a.buf->upload(alo, pack(a_log, false).data(), a_log.size() * 4);
  a.buf->upload(dof, pack(D, false).data(), C * 4);
  a.buf->upload(cso, pack(cs0, false).data(), cs0.size() * 4);
  a.buf->upload(ho, pack(h0, false).data(), h0.size() * 4);
  std::unique_ptr<Program> progs[2];
  for (int i = 0; i < 2; ++i) {
    const Call& k = calls[i];
    progs[i] = std::make_unique<Program>(dev, i == 0 ? "mixer prefill" : "mixer decode");
    Conv1dStateParams cp;
    cp.T = k.n, cp.C = C, cp.x_stride = 2 * C;
    conv.record(*progs[i], cp, a.range(k.ip, size_t(k.n) * 2 * C * es), a.range(wo, w.size() * es), a.range(bo, C * es),
                a.range(cso, cs0.size() * 4), a.range(k.u, size_t(k.n) * C * es));
    sp.T = k.n;
    SelectiveScanBuffers sb;
    sb.u = a.range(k.u, size_t(k.n) * C * es), sb.delta_raw = a.range(k.dr, size_t(k.n) * C * es);
    sb.A_log = a.range(alo, a_log.size() * 4), sb.bc = a.range(k.bc, size_t(k.n) * bcs * es);
    sb.D = a.range(dof, C * 4), sb.z = a.range(k.ip, size_t(k.n) * 2 * C * es), sb.h = a.range(ho, h0.size() * 4);
    sb.y = a.range(k.y, size_t(k.n) * C * es), sb.scratch = a.range(sco, scb);
    scan.record(*progs[i], sp, sb);
  }
  CHECK(scan_chunk(sp) == 0);  // the decode program: one dispatch
  auto slice = [](const std::vector<double>& v, size_t first, size_t n) {
    return std::vector<double>(v.begin() + first, v.begin() + first + n);
  };
  std::vector<float> got;
  auto read = [&](VkDeviceSize off, size_t n, size_t e) {
    std::vector<uint8_t> b(n * e);
    a.buf->download(off, b.data(), b.size());
    for (size_t i = 0; i < n; ++i) got.push_back(value_at(b, i, e));
  };
  for (uint32_t row = 0; row < rows;) {
    const Call& k = calls[row == 0 ? 0 : 1];
    a.buf->upload(k.ip, pack(slice(inproj, size_t(row) * 2 * C, size_t(k.n) * 2 * C), f16).data(),
                  size_t(k.n) * 2 * C * es);
    a.buf->upload(k.dr, pack(slice(dr, size_t(row) * C, size_t(k.n) * C), f16).data(), size_t(k.n) * C * es);
    a.buf->upload(k.bc, pack(slice(bc, size_t(row) * bcs, size_t(k.n) * bcs), f16).data(), size_t(k.n) * bcs * es);
    progs[row == 0 ? 0 : 1]->run();
    read(k.y, size_t(k.n) * C, es);
    row += k.n;
  }
  read(cso, cs0.size(), 4);
  read(ho, h0.size(), 4);
  const bench::Check chk = bench::compare("float64 reference", got, expect, f16, bench::scan_tolerance_factor(rows));
  INFO("max_abs " << chk.max_abs << " max|ref| " << chk.max_ref << " nmse " << chk.nmse << " nonfinite "
                  << chk.nonfinite);
  CHECK(chk.ok);
}
}  // namespace

TEST_CASE("ssm: a decode program recorded once replays token by token fp32") { chained_mixer(Precision::fp32); }
TEST_CASE("ssm: a decode program recorded once replays token by token fp16") { chained_mixer(Precision::fp16); }
