// The forward recipe: every block written once (recipe.hpp).
#include "model/recipe.hpp"

#include <algorithm>
#include <tuple>

#include "diffvk/error.hpp"

namespace diffvk {

LinearWeight bind_linear(Forward& f, const std::string& name, uint32_t in, const std::vector<WeightPart>& parts,
                         QuantType format) {
  LinearWeight w;
  w.name = name;
  w.in = in;
  w.format = format;
  for (size_t i = 0; i < parts.size(); ++i) {
    const WeightPart& p = parts[i];
    const std::string n = parts.size() == 1 ? name : name + ".part" + std::to_string(i);
    const TensorRef t =
        format == QuantType::f16
            ? f.g.bind(n, TensorRole::weight, f.storage(), {p.rows, uint64_t(in)}, p.range)
            : f.g.bind(n, TensorRole::weight, ElemType::bytes, {quant_layout(format, p.rows, in).bytes()}, p.range);
    w.parts.push_back({uint32_t(p.row0), uint32_t(p.rows), t});
    w.out = std::max<uint32_t>(w.out, uint32_t(p.row0 + p.rows));
  }
  return w;
}

TensorRef bind_vector(Forward& f, const std::string& name, uint32_t n, BufferRange range) {
  return f.g.bind(name, TensorRole::weight, f.storage(), {n}, range);
}

TensorRef bind_f32(Forward& f, const std::string& name, std::vector<uint64_t> shape, BufferRange range) {
  return f.g.bind(name, TensorRole::weight, ElemType::f32, std::move(shape), range);
}

AttnScratch attn_scratch(const DiffAttnKernel& attn, const AttnShape& s) {
  const AttnSoftmax sm = attn.softmax();
  const uint32_t H = sm == AttnSoftmax::v2 ? 2 * s.H : s.H;  // DIFF V2 calls count query heads
  const uint32_t decode_rows = std::min<uint32_t>(attn.max_decode_rows(), s.chunk);
  const auto call_of = [&](uint32_t rows) {
    AttnCall c;
    c.S = rows;
    c.H = H;
    c.Hkv = s.Hkv;
    c.capacity = s.capacity;
    c.q_stride = c.o_stride = s.E;
    return c;
  };
  const AttnCall worst = call_of(std::max(1u, decode_rows));
  uint32_t splits = 1;
  bool split_decode = false;
  for (uint32_t r = 1; r <= decode_rows; ++r) {  // programs replayed at any position: splits over the capacity
    // A decode that takes the prefill kernel (the tuning's attn_decode; a call sees at most the capacity's keys)
    // needs no split scratch.
    if (attn.decode_on_prefill(r, s.capacity)) continue;
    uint32_t len = 0;
    splits = std::max(splits, attn.decode_splits_for_capacity(call_of(r), &len));
    split_decode = true;
  }
  AttnScratch sc{split_decode ? DiffAttnKernel::part_bytes(worst, s.D, splits, sm) : 0,
                 split_decode ? DiffAttnKernel::stat_bytes(worst, splits, sm) : 0};
  if (s.chunk > attn.max_decode_rows()) {  // prefill chunks through split-K on loop-limited devices
    const AttnCall pc = call_of(s.chunk);
    uint32_t len = 0;
    if (const uint32_t ps = attn.prefill_splits_for_keys(s.capacity, &len)) {  // any position up to the capacity
      sc.part = std::max(sc.part, DiffAttnKernel::part_bytes(pc, s.D, ps, sm));
      sc.stat = std::max(sc.stat, DiffAttnKernel::stat_bytes(pc, ps, sm));
    }
  }
  sc.part = std::max<uint64_t>(sc.part, 4);
  sc.stat = std::max<uint64_t>(sc.stat, 4);
  return sc;
}

RopeKvParams rope_kv_params(const Forward& f, const AttnShape& s) {
  RopeKvParams rp;
  std::tie(rp.rows, rp.H, rp.Hkv, rp.D, rp.capacity) = std::tie(f.rows, s.H, s.Hkv, s.D, s.capacity);
  rp.pos0 = 0;  // the position is read at run time (Forward::pos)
  return rp;
}

uint64_t attn_sync_bytes(const AttnShape& s, bool v2) {
  AttnCall call;
  call.S = std::max(1u, s.chunk);
  call.pos0 = 0;
  call.H = v2 ? 2 * s.H : s.H;
  call.Hkv = s.Hkv;
  call.capacity = s.capacity;
  return DiffAttnKernel::sync_bytes(call);
}

TensorRef add_embed(Forward& f, TensorRef tokens, const LinearWeight& table, const std::string& x_name) {
  const uint32_t rows = f.rows, E = table.in, V = table.out;
  const TensorRef x = f.g.tensor(x_name, TensorRole::activation, ElemType::f32, {rows, E});
  const EmbedKernel* k = f.k.embed.get();
  const QuantType format = table.format;
  for (const auto& part : table.parts)  // one part unless the table exceeds a binding
    f.g.add("embed", {tokens, part.t}, {x}, [=](Program& p, const GraphBinding& b) {
      k->record_part(p, b[tokens].sub(0, rows * 4ull), b[part.t], b[x], rows, E, part.rows, part.row0, V, format);
    });
  f.g.kernel(std::string("embed ") + quant_type_name(format));
  return x;
}

void add_linear(Forward& f, const std::string& label, TensorRef x, const LinearWeight& w, TensorRef y, bool residual,
                const RowLinear* row, uint32_t x_stride) {
  const bool quant = w.format != QuantType::f16;
  const TensorRef bias = w.bias;
  if (bias.valid() && w.parts.size() != 1)
    throw Error(Status::internal, label + ": the biased weight '" + w.name + "' is split into " +
                                      std::to_string(w.parts.size()) + " parts (a bias needs one)");
  const GraphTensor &xt = f.g.at(x), &yt = f.g.at(y);
  const Elem xe = f.elem(x), ye = f.elem(y);
  const uint64_t ys = elem_type_bytes(yt.dtype), xs = elem_type_bytes(xt.dtype);
  const LinearKernel* k = f.k.linear.get();
  const QuantRowKernel* qk = f.k.qrow.get();
  if (quant && !qk)
    throw Error(Status::internal,
                label + ": quantized weight '" + w.name + "' but the model built no quantized kernel");
  const uint32_t rows = f.rows, in = w.in, out = w.out, xs_elems = x_stride ? x_stride : in;
  const QuantType q = w.format;
  for (const auto& part : w.parts) {
    std::vector<TensorRef> reads{x, part.t};
    if (residual) reads.push_back(y);
    if (bias.valid()) reads.push_back(bias);
    if (row) {
      if (row->pro == Prologue::rmsnorm) reads.push_back(row->norm_w);
      const RowLinear r = *row;
      const uint64_t x_elems = uint64_t(in) * (r.pro == Prologue::silu_mul ? 2 : 1);
      f.g.add(label, reads, {y}, [=](Program& p, const GraphBinding& b) {
        const BufferRange xr = b[x].sub(0, x_elems * xs);
        const BufferRange yr = b[y].sub(uint64_t(part.row0) * ys, uint64_t(part.rows) * ys);
        LinearRowParams lp;
        lp.in = in;
        lp.out = part.rows;
        lp.pro = static_cast<RowPrologue>(r.pro);
        lp.eps = r.eps;
        lp.x_elem = xe;
        lp.y_elem = ye;
        const BufferRange res = residual ? yr : BufferRange{},
                          nw = r.pro == Prologue::rmsnorm ? b[r.norm_w] : BufferRange{},
                          br = bias.valid() ? b[bias] : BufferRange{};
        if (q == QuantType::f16)
          k->record_row(p, xr, b[part.t], yr, lp, res, nw, br);
        else
          qk->record(p, q, xr, b[part.t], yr, lp, res, nw, br);
      });
      // The recipe's fusion: the prologue the one-row kernel runs before its dot products.
      const char* fused = r.pro == Prologue::rmsnorm    ? ", rmsnorm fused"
                          : r.pro == Prologue::silu_mul ? ", silu_mul fused"
                                                        : "";
      f.g.kernel((q == QuantType::f16 ? k->row_choice(in) : qk->row_choice(q, in)) + fused);
    } else {
      f.g.add(label, reads, {y}, [=](Program& p, const GraphBinding& b) {
        const BufferRange all = b[y];
        const BufferRange yr =
            all.sub(uint64_t(part.row0) * ys, all.size - uint64_t(part.row0) * ys);  // a column slice
        LinearParams lp;
        lp.rows = rows;
        lp.in = in;
        lp.out = part.rows;
        lp.x_stride = xs_elems;
        lp.y_stride = out;
        const BufferRange br = bias.valid() ? b[bias] : BufferRange{};
        if (q == QuantType::f16)
          k->record(p, b[x], b[part.t], yr, lp, residual ? yr : BufferRange{}, ye, br);
        else  // the blocks are dequantized in registers by the matmul itself (no dequantized copy)
          k->record_quant(p, q, b[x], b[part.t], yr, lp, residual ? yr : BufferRange{}, ye, br);
      });
      f.g.kernel(k->matmul_choice(rows, in, part.rows, q));
    }
  }
}

TensorRef add_norm(Forward& f, const std::string& name, TensorRef x, TensorRef w, TensorRef b, uint32_t E, float eps,
                   uint32_t n_rows) {
  const uint32_t rows = n_rows ? n_rows : f.rows;
  const TensorRef y = f.g.tensor(name, TensorRole::activation, f.storage(), {rows, E});
  const Elem xe = f.elem(x);
  if (b.valid()) {  // LayerNorm with bias
    const LayerNormKernel* k = f.k.layer_norm.get();
    if (!k) throw Error(Status::internal, name + ": a LayerNorm but the model built no layer_norm kernel");
    f.g.add("layer_norm", {x, w, b}, {y}, [=](Program& p, const GraphBinding& bd) {
      LayerNormParams np;
      np.rows = rows;
      np.width = E;
      np.x_stride = np.y_stride = E;  // dense rows
      np.eps = eps;
      k->record(p, bd[x], bd[w], bd[b], bd[y], np, xe);
    });
    f.g.kernel("layer_norm");
    return y;
  }
  // RMSNorm: HeadRmsNormKernel with one head of width E.
  const HeadRmsNormKernel* k = f.k.norm.get();
  f.g.add("rmsnorm", {x, w}, {y}, [=](Program& p, const GraphBinding& bd) {
    HeadRmsNormParams np;
    np.rows = rows;
    np.heads = 1;
    np.width = E;
    np.row_stride = E;
    np.gain = 1.0f;
    np.eps = eps;
    k->record(p, bd[x], bd[w], bd[y], np, xe);
  });
  f.g.kernel("head_rmsnorm");
  return y;
}

TensorRef add_attention_op(Forward& f, const std::string& P, TensorRef q, TensorRef kc, TensorRef vc, TensorRef subln,
                           const AttnShape& s, const AttnOp& op) {
  const uint32_t rows = op.rows ? op.rows : f.rows, row0 = op.row0, H = s.H, Hkv = s.Hkv, cap = s.capacity;
  if (uint64_t(row0) + rows > f.rows)
    throw Error(Status::internal, "attention " + P + ": rows " + std::to_string(row0) + " + " + std::to_string(rows) +
                                      " of a pass of " + std::to_string(f.rows));
  const bool v2 = op.v2;
  // Differential attention with the headwise norm (split-K scratch sized for every program of the plan, shared by the
  // pieces of one prefix).
  const AttnScratch sc = attn_scratch(f.k.attn_for(f.kv), s);
  auto scratch = [&](const std::string& name, uint64_t bytes) {
    const TensorRef t = f.g.find(name);
    return t.valid() ? t : f.g.scratch(name, bytes);
  };
  const TensorRef part = scratch(P + "attn.split_part", sc.part), stat = scratch(P + "attn.split_stat", sc.stat);
  const TensorRef o =
      op.out.valid() ? op.out : f.g.tensor(P + "attn.out", TensorRole::activation, f.storage(), {f.rows, op.o_stride});
  const uint64_t es = elem_type_bytes(f.storage()), q_off = uint64_t(row0) * op.q_stride * es,
                 q_len = uint64_t(rows) * op.q_stride * es, o_off = uint64_t(row0) * op.o_stride * es,
                 o_len = uint64_t(rows) * op.o_stride * es;
  const bool whole = row0 == 0 && rows == f.rows;
  const DiffAttnKernel* attn = &f.k.attn_for(f.kv);
  const float lambda = static_cast<float>(op.lambda), gain = static_cast<float>(1.0 - op.lambda_init),
              seps = s.subln_eps;
  const TensorRef sync = f.attn_sync, pos = f.pos;
  if (!sync.valid())
    throw Error(Status::internal, "attention block: the forward pass has no attention counters (Forward::attn_sync)");
  std::vector<TensorRef> reads{q, kc, vc, pos, sync};
  if (!v2) reads.push_back(subln);
  const uint32_t q_stride = op.q_stride, o_stride = op.o_stride, window = op.window;
  const bool ring = op.ring;
  f.g.add("attention", reads, {o, part, stat, sync}, [=](Program& p, const GraphBinding& b) {
    AttnCall call;  // V2: 2H query heads, no λ scalar, no headwise norm
    call.S = rows;
    call.pos0 = row0;
    call.H = v2 ? 2 * H : H;
    call.Hkv = Hkv;
    call.capacity = cap;
    call.q_stride = q_stride;
    call.o_stride = o_stride;
    call.lambda = v2 ? 0.0f : lambda;
    call.gain = v2 ? 1.0f : gain;
    call.eps = v2 ? 0.0f : seps;
    call.dyn_pos = b[pos];
    call.window = window;
    call.ring = ring;
    const BufferRange sl = v2 ? BufferRange{} : b[subln];
    const BufferRange qr = whole ? b[q] : b[q].sub(q_off, q_len), orr = whole ? b[o] : b[o].sub(o_off, o_len);
    if (rows <= attn->max_decode_rows() && !attn->decode_on_prefill(call)) {
      uint32_t len = 0;
      const uint32_t splits = attn->decode_splits_for_capacity(call, &len);
      attn->record_decode(p, qr, b[kc], b[vc], sl, orr, {b[part], b[stat], b[sync]}, call, splits, len);
    } else {
      attn->record_prefill(p, qr, b[kc], b[vc], sl, orr, call, {b[part], b[stat], b[sync]});
    }
  });
  f.g.kernel(attn->choice(rows, cap, window));
  return o;
}

TensorRef add_attention_block(Forward& f, TensorRef x, const AttnShape& s, const AttnBlock& w,
                              const std::string& y_name, TensorRole y_role) {
  const std::string& P = w.prefix;
  const uint32_t rows = f.rows, E = s.E, H = s.H, Hkv = s.Hkv, D = s.D, cap = s.capacity;
  const bool v2 = w.v2;
  if ((f.k.attn->softmax() == AttnSoftmax::v2) != v2)
    throw Error(Status::internal, "attention block: the attention kernel does not match the block's DIFF variant");
  // Widths: q (V2: 2H query heads, then H λ logits), the fused projection, the heads' output.
  const uint32_t qw = v2 ? 2 * H * D + H : E, qkvw = v2 ? qw + 2 * Hkv * D : E + 4 * Hkv * D, ow = v2 ? H * D : E;
  const bool residual = w.norm.valid();
  const TensorRef q = f.g.tensor(P + "q.roped", TensorRole::activation, f.storage(), {rows, qw});
  const TensorRef kc = w.k_cache, vc = w.v_cache, table = w.rope_table, pos = f.pos;
  // One row and an fp16/fp32 cache: the q/k/v projection (with the block norm as its prologue) ends in RoPE and
  // the KV append (linear_row_rope, dense or quantized weights), one dispatch; DIFF V2's λ logits are copied
  // into q's row on the way. Otherwise the projection, then rope_kv: a Q8_0 append needs a whole block's
  // maximum, which spans workgroups of the one-row kernel, and an odd number of V2 λ columns (odd H) would
  // split k's rotation pairs across workgroups.
  const bool fused_rope = f.row && (!v2 || H % 2 == 0) && f.kv == KvFormat::storage && w.wqkv.parts.size() == 1;
  // The block norm: a one-row projection's prologue (pro), unless the tuning's row_prologue splits the prologues (CPU
  // drivers); otherwise its own node, and the projection reads the normalized rows (xin).
  const bool pro = residual && f.row && f.k.linear->row_fuses_prologues();
  const TensorRef xin = residual && !pro ? add_norm(f, P + "attn_norm.out", x, w.norm, {}, E, s.eps) : x;
  if (fused_rope) {
    const LinearKernel* k = f.k.linear.get();
    const QuantRowKernel* qk = f.k.qrow.get();
    const QuantType wf = w.wqkv.format;
    if (wf != QuantType::f16 && !qk)
      throw Error(Status::internal,
                  "qkv: quantized weight '" + w.wqkv.name + "' but the model built no quantized kernel");
    const TensorRef wt = w.wqkv.parts[0].t, norm = w.norm;
    std::vector<TensorRef> reads{xin, wt, table, pos};
    if (pro) reads.push_back(norm);
    const Elem xe = f.elem(xin);
    const float eps = s.eps;
    const uint64_t x_bytes = uint64_t(E) * elem_type_bytes(f.g.at(xin).dtype);
    f.g.add("qkv+rope_kv", reads, {q, kc, vc}, [=](Program& p, const GraphBinding& b) {
      LinearRowParams lp;
      lp.in = E;
      lp.out = qkvw;
      lp.pro = pro ? RowPrologue::rmsnorm : RowPrologue::none;
      lp.eps = eps;
      lp.x_elem = xe;
      lp.y_elem = Elem::storage;
      RowRope rr;  // V1: q = 2H sub-heads of D, k = 2Hkv; V2: 2H q heads, then H λ columns, Hkv k heads of D
      rr.table = b[table];
      rr.k_cache = b[kc];
      rr.v_cache = b[vc];
      rr.dyn_pos = b[pos];
      rr.qcols = v2 ? 2 * H * D : qw;
      rr.kcols = v2 ? Hkv * D : 2 * Hkv * D;
      rr.D = D;
      rr.kw = v2 ? D : 2 * D;
      rr.capacity = cap;
      rr.pos0 = 0;
      rr.lcols = v2 ? H : 0;
      if (wf == QuantType::f16)
        k->record_row_rope(p, b[xin].sub(0, x_bytes), b[wt], b[q], lp, pro ? b[norm] : BufferRange{}, rr);
      else
        qk->record_rope(p, wf, b[xin].sub(0, x_bytes), b[wt], b[q], lp, pro ? b[norm] : BufferRange{}, rr);
    });
    f.g.kernel((wf == QuantType::f16 ? k->row_choice(E, true) : qk->row_choice(wf, E, true)) +
               (pro ? ", rmsnorm fused" : ""));
  } else {  // the projection (the block norm fused into the one-row linear, else its own node), then rope_kv
    const TensorRef qkv = f.g.tensor(P + "qkv", TensorRole::activation, f.storage(), {rows, qkvw});
    const RowLinear r = pro ? RowLinear{Prologue::rmsnorm, w.norm, s.eps} : RowLinear{};
    add_linear(f, "qkv", xin, w.wqkv, qkv, false, f.row ? &r : nullptr);
    const RopeKvKernel* rope = &f.k.rope_for(f.kv);
    RopeKvParams rp = rope_kv_params(f, s);
    rp.kheads = v2 ? Hkv : 0;
    rp.lam = v2 ? H : 0;
    f.g.add("rope_kv", {qkv, table, pos, kc, vc}, {q, kc, vc}, [=](Program& p, const GraphBinding& b) {
      rope->record(p, b[qkv], b[table], b[q], b[kc], b[vc], rp, b[pos]);
    });
    f.g.kernel(f.kv == KvFormat::storage ? "rope_kv" : "rope_kv Q8_0 cache");
  }
  if (w.tap && f.kv != KvFormat::storage)
    throw Error(Status::unsupported, "attention maps: not available with a Q8_0 KV cache (use the f16 one)");
  if (w.tap) {  // debug: this layer's softmaxes (and V2's λ rows), from the roped queries and the cached keys
    const MapTap tap = *w.tap;
    const AttnProbsKernel* probs = f.k.probs.get();
    const TensorRef maps =
        f.g.bind(P + "attention maps", TensorRole::external, ElemType::f32, {tap.out.size / 4}, tap.out);
    AttnProbsParams pp;
    pp.rows = rows;
    std::tie(pp.H, pp.Hkv, pp.D) = std::tie(H, Hkv, D);
    pp.capacity = cap;
    pp.T = tap.T;
    pp.pos0 = 0;
    pp.head0 = tap.head0;
    pp.heads = tap.heads;
    pp.v2 = v2;
    f.g.add("attn_probs", {q, kc, pos}, {maps},
            [=](Program& p, const GraphBinding& b) { probs->record(p, b[q], b[kc], b[pos], b[maps], pp); });
  }
  AttnOp op;
  op.v2 = v2;
  op.lambda = w.lambda;
  op.lambda_init = w.lambda_init;
  op.q_stride = v2 ? qw : E;
  op.o_stride = v2 ? ow : E;
  const TensorRef o = add_attention_op(f, P, q, kc, vc, w.subln, s, op);
  // Output projection: into the residual stream, or a new tensor (bare layer).
  const RowLinear r{};
  if (residual) {
    add_linear(f, "out_proj", o, w.wo, x, true, f.row ? &r : nullptr);
    return x;
  }
  const TensorRef y = f.g.tensor(y_name, y_role, f.storage(), {rows, E});
  add_linear(f, "out_proj", o, w.wo, y, false, f.row ? &r : nullptr);
  return y;
}

void add_mlp_block(Forward& f, TensorRef x, uint32_t E, const MlpBlock& w) {
  const std::string& P = w.prefix;
  const TensorRef gu = f.g.tensor(P + "ffn.gate_up", TensorRole::activation, f.storage(), {f.rows, 2ull * w.I});
  static const RowLinear plain{};
  const RowLinear swiglu{Prologue::silu_mul, {}, w.eps};
  // SwiGLU as its own node, then down (a one-row pass's plain one-row kernel: `row`).
  auto silu_then_down = [&](const RowLinear* row) {
    const TensorRef a = f.g.tensor(P + "ffn.act", TensorRole::activation, f.storage(), {f.rows, w.I});
    const SiluMulKernel* silu = f.k.silu.get();
    const uint32_t rows = f.rows, I = w.I;
    f.g.add("silu_mul", {gu}, {a}, [=](Program& p, const GraphBinding& b) { silu->record(p, b[gu], b[a], rows, I); });
    f.g.kernel("silu_mul");
    add_linear(f, "down", a, w.wdown, x, true, row);
  };
  // A one-row pass fuses each prologue into its linear unless the tuning's row_prologue splits them (CPU drivers):
  // the norm into gate_up, SwiGLU into down.
  const bool fuse = f.k.linear->row_fuses_prologues();
  if (f.row && !w.norm_b.valid()) {
    if (fuse) {
      const RowLinear norm{Prologue::rmsnorm, w.norm, w.eps};
      add_linear(f, "gate_up", x, w.wgu, gu, false, &norm);
      add_linear(f, "down", gu, w.wdown, x, true, &swiglu);
    } else {
      add_linear(f, "gate_up", add_norm(f, P + "ffn_norm.out", x, w.norm, {}, E, w.eps), w.wgu, gu, false, &plain);
      silu_then_down(&plain);
    }
    return;
  }
  // One row without the fused norm (SambaY's LayerNorm): the one-row kernels, SwiGLU fused into down as above.
  const bool one = f.rows == 1 && w.norm_b.valid();
  add_linear(f, "gate_up", add_norm(f, P + "ffn_norm.out", x, w.norm, w.norm_b, E, w.eps), w.wgu, gu, false,
             one ? &plain : nullptr);
  if (one && fuse) {
    add_linear(f, "down", gu, w.wdown, x, true, &swiglu);
    return;
  }
  silu_then_down(one ? &plain : nullptr);
}

const char* head_out_name(HeadOut o) {
  switch (o) {
    case HeadOut::all:
      return "all";
    case HeadOut::last:
      return "last";
    case HeadOut::none:
      return "none";
    case HeadOut::sample:
      return "sample";
  }
  return "?";
}

TensorRef add_head(Forward& f, TensorRef x, const Head& h, HeadOut out) {
  if (out == HeadOut::none) return {};
  const uint32_t rows = f.rows, E = h.E, V = h.vocab;
  if (out == HeadOut::all) {
    const TensorRef xf = add_norm(f, "norm.out", x, h.norm, h.norm_b, E, h.eps);
    const TensorRef logits = f.g.tensor("logits [f32]", TensorRole::output, ElemType::f32, {rows, V});
    static const RowLinear plain{};  // one row with a LayerNorm (SambaY's decode): the one-row kernel
    add_linear(f, "lm_head", xf, h.lm_head, logits, false, rows == 1 && h.norm_b.valid() ? &plain : nullptr);
    return logits;
  }
  if (h.norm_b.valid())
    throw Error(Status::internal, "head: a LayerNorm final norm is built for HeadOut::all only (it is not fused)");
  // The last row only, with the final norm fused into lm_head. A storage binding must start aligned, and
  // the last row of a multi-row program starts at (rows − 1)·E·4 bytes: it is staged into its own tensor
  // whenever rows > 1, so that every row count of a planned variant has the same tensors (fit_graph)
  // whatever the device's minStorageBufferOffsetAlignment (SwiftShader: 256). One E-float copy per chunk.
  TensorRef xl = x;
  if (rows > 1) {
    xl = f.g.tensor("norm.out", TensorRole::activation, ElemType::f32, {E});
    const TensorRef staged = xl;
    f.g.add("last row", {x}, {staged}, [=](Program& p, const GraphBinding& b) {
      p.copy(b[x].sub(uint64_t(rows - 1) * E * 4, uint64_t(E) * 4), b[staged], "last row");
    });
    f.g.kernel("copy");
  }
  const TensorRef logits = f.g.tensor("logits [f32]", TensorRole::output, ElemType::f32, {V});
  const RowLinear r{Prologue::rmsnorm, h.norm, h.eps};
  static const RowLinear plain{};
  if (f.k.linear->row_fuses_prologues())
    add_linear(f, "lm_head", xl, h.lm_head, logits, false, &r);
  else  // the tuning's row_prologue (CPU drivers): the norm's own dispatch first
    add_linear(f, "lm_head", add_norm(f, "norm.out [storage]", xl, h.norm, {}, E, h.eps, 1), h.lm_head, logits, false,
               &plain);
  if (out == HeadOut::sample) add_sample(f, logits, h.params, h.picked, V);
  return logits;
}

void add_sample(Forward& f, TensorRef logits, TensorRef params, TensorRef picked, uint32_t V) {
  const SampleKernel* k = f.k.sample.get();
  if (!k) throw Error(Status::internal, "sample: the model's kernels have no sampler");
  f.g.add("sample", {logits, params}, {picked},
          [=](Program& p, const GraphBinding& b) { k->record(p, b[logits], b[params], b[picked], V); });
  f.g.kernel("sample");
}

}  // namespace diffvk
