// Reads a GGUF file written by `diffvk quantize` with an independent reader (npm's @huggingface/gguf) and
// compares it with diffvk's own listing (`diffvk quantize --list`) and with what docs/gguf.md promises.
// Usage: node gguf_reader_check.mjs NODE_MODULES_DIR FILE.gguf LISTING.json TYPE(f16|q8_0|q4_0)
// Exit 0: match; 1: mismatch; 77: the package cannot be loaded (the test is skipped).
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const [nodeModules, file, listingPath, kind] = process.argv.slice(2);
let gguf;
try {
  const require = createRequire(path.join(path.resolve(nodeModules), "noop.js"));
  ({ gguf } = require("@huggingface/gguf"));
} catch (e) {
  console.log(`SKIP: @huggingface/gguf not loadable from ${nodeModules}: ${e.message}`);
  process.exit(77);
}

const errors = [];
const fail = (m) => errors.push(m);
const listing = JSON.parse(readFileSync(listingPath, "utf8"));
const { metadata, tensorInfos, typedMetadata } = await gguf(path.resolve(file), { allowLocalFile: true, typedMetadata: true });

// ggml type ids and GGUF value type ids (gguf.md).
const GGML = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8, BF16: 30 };
const VT = ["uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"];
const num = (v) => (typeof v === "bigint" ? Number(v) : v);

if (Number(metadata.version) !== listing.version) fail(`version ${metadata.version} vs ${listing.version}`);

// Tensors: same names in the same order, same types, dims and offsets.
if (tensorInfos.length !== listing.tensors.length) fail(`${tensorInfos.length} tensors vs ${listing.tensors.length}`);
for (let i = 0; i < Math.min(tensorInfos.length, listing.tensors.length); ++i) {
  const a = tensorInfos[i], b = listing.tensors[i];
  if (a.name !== b.name) fail(`tensor ${i}: name ${a.name} vs ${b.name}`);
  if (a.dtype !== GGML[b.type]) fail(`tensor ${b.name}: ggml type ${a.dtype} vs ${b.type}`);
  const shape = a.shape.map(num);
  if (JSON.stringify(shape) !== JSON.stringify(b.dims)) fail(`tensor ${b.name}: dims ${shape} vs ${b.dims}`);
  if (num(a.offset) !== b.offset) fail(`tensor ${b.name}: offset ${a.offset} vs ${b.offset}`);
}

// Metadata: the same keys, types and values.
const skip = new Set(["version", "tensor_count", "kv_count"]);
const keys = Object.keys(typedMetadata).filter((k) => !skip.has(k));
const want = Object.keys(listing.metadata);
if (JSON.stringify([...keys].sort()) !== JSON.stringify([...want].sort())) fail(`metadata keys ${keys} vs ${want}`);
for (const k of want) {
  const a = typedMetadata[k], b = listing.metadata[k];
  if (!a) continue;
  if (VT[a.type] !== b.type) fail(`${k}: type ${VT[a.type]} vs ${b.type}`);
  if (b.type === "array") {
    if (VT[a.subType] !== b.elem_type) fail(`${k}: element type ${VT[a.subType]} vs ${b.elem_type}`);
    const av = a.value.map(num);
    if (JSON.stringify(av) !== JSON.stringify(b.value)) fail(`${k}: array values differ`);
  } else if (num(a.value) !== b.value) {
    fail(`${k}: value ${a.value} vs ${b.value}`);
  }
}

// What docs/gguf.md promises, independently of the listing.
const md = (k) => (typedMetadata[k] ? num(typedMetadata[k].value) : undefined);
if (md("general.architecture") !== "diffllama") fail(`general.architecture ${md("general.architecture")}`);
for (const k of ["context_length", "embedding_length", "block_count", "feed_forward_length", "attention.head_count",
                 "attention.head_count_kv", "attention.layer_norm_rms_epsilon", "rope.freq_base"]) {
  if (md(`diffllama.${k}`) === undefined) fail(`missing diffllama.${k}`);
}
const blocks = md("diffllama.block_count");
const byName = new Map(tensorInfos.map((t) => [t.name, t]));
const lin = { f16: GGML.F16, q8_0: GGML.Q8_0, q4_0: GGML.Q4_0 }[kind];
const need = ["token_embd.weight", "output_norm.weight"];
for (let l = 0; l < blocks; ++l) {
  for (const n of ["attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                   "attn_sub_norm.weight", "attn_lambda_q1", "attn_lambda_k1", "attn_lambda_q2", "attn_lambda_k2",
                   "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"]) need.push(`blk.${l}.${n}`);
}
for (const n of need) {
  const t = byName.get(n);
  if (!t) { fail(`missing tensor ${n}`); continue; }
  const isNorm = /norm|lambda/.test(n);
  if (isNorm && t.dtype !== GGML.F32) fail(`${n}: norms and lambda must be F32 (is ${t.dtype})`);
  if (/attn_[qkv]\.|attn_output|ffn_(gate|up|down)/.test(n) && t.dtype !== lin && !(t.dtype === GGML.F16 && num(t.shape[0]) % 32 !== 0)) {
    fail(`${n}: ggml type ${t.dtype}, expected ${lin}`);
  }
}
const E = md("diffllama.embedding_length");
const q = byName.get("blk.0.attn_q.weight");
if (q && (num(q.shape[0]) !== E || num(q.shape[1]) !== E)) fail(`blk.0.attn_q.weight shape ${q.shape}`);

if (errors.length) {
  for (const e of errors) console.log("MISMATCH: " + e);
  process.exit(1);
}
console.log(`${file}: @huggingface/gguf reads ${tensorInfos.length} tensors and ${want.length} keys, all as diffvk wrote them`);
