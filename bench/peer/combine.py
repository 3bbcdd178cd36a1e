#!/usr/bin/env python3
"""One round of bench/peer/run as a result file of docs/benchmarks/README.md's schema (a "tables" entry).

Reads, beside OUT, raw/<prefix>diffvk-rN.json (diffvk bench --model --weights all) and raw/<prefix>llama-*-rN.json
(llama-bench -o json: Vulkan with cooperative matrices off and on, CPU backend). Standard library only.
"""
import argparse
import datetime
import json
import os
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def llama_rates(records):
    """{(weights, 'pp' | 'tg'): tokens/s} of llama-bench's records (model file names end in -f16/-q8_0/-q4_0)."""
    out = {}
    for r in records:
        name = os.path.basename(r.get("model_filename", ""))
        w = next((t for t in ("f16", "q8_0", "q4_0") if name.endswith("-" + t + ".gguf")), None)
        if w is None:
            continue
        kind = "pp" if r.get("n_prompt", 0) > 0 and r.get("n_gen", 0) == 0 else "tg"
        out[(w, kind)] = float(r["avg_ts"])
    return out


def main():
    ap = argparse.ArgumentParser()
    for a in ("--out", "--raw-prefix", "--mesa", "--llama", "--ggml", "--cpu", "--commit"):
        ap.add_argument(a, required=True)
    ap.add_argument("--round", type=int, required=True)
    ap.add_argument("--rounds", type=int, required=True)
    a = ap.parse_args()
    base = os.path.dirname(os.path.abspath(a.out))
    raw = lambda what: a.raw_prefix + "%s-r%d.json" % (what, a.round)
    dv = load(os.path.join(base, raw("diffvk")))
    vk = llama_rates(load(os.path.join(base, raw("llama-vk"))))
    vk_cm = llama_rates(load(os.path.join(base, raw("llama-vk-coopmat"))))
    cpu = llama_rates(load(os.path.join(base, raw("llama-cpu"))))
    copy = dv["ceilings"]["copy_gbps"]
    rows, says = [], []
    fmt = lambda v: "%.1f" % v if v is not None else "—"
    ratio = lambda x, y: "%.2fx" % (x / y) if x and y else "—"
    for wt in dv["weight_types"]:
        w = wt["weights"]
        pp, tg = wt["prefill"]["tokens_per_s"], wt["decode"]["tokens_per_s"]
        frac = wt["decode"]["fraction_of_copy_ceiling"]
        best = lambda kind: max([v for v in (vk.get((w, kind)), vk_cm.get((w, kind))) if v is not None], default=None)
        bpp, btg = best("pp"), best("tg")
        rows.append([w, fmt(pp), fmt(bpp), ratio(pp, bpp), fmt(tg), fmt(btg), ratio(tg, btg), "%.0f%%" % (100 * frac),
                     fmt(cpu.get((w, "tg")))])
        if btg:
            says.append("%s decode: %.1f against %.1f tokens/s, %.2fx (target >= 1.3x: %s); %.0f%% of the %.2f GB/s "
                        "copy ceiling (target >= 40%%: %s)." % (w, tg, btg, tg / btg, "met" if tg / btg >= 1.3 else
                                                               "missed", 100 * frac, copy, "met" if frac >= 0.4 else
                                                               "missed"))
    doc = {
        "schema": 1,
        "title": "Model-level side by side with llama.cpp (134M DiffLlama / Llama shapes)",
        "benchmark": "peer llama.cpp",
        "device": "lavapipe (llvmpipe), " + a.cpu,
        "driver": dv.get("device", {}).get("driver_info") or ("Mesa " + a.mesa),
        "date": datetime.date.today().isoformat(),
        "commit": a.commit,
        "command": "bash bench/peer/run OUT.json (docs/peer-comparison.md): diffvk bench --model DIR --weights all "
                   "--prompt-tokens 128 --decode-tokens 32 --runs 3; llama-bench -p 128 -n 32 -ngl 99 -fa 1 -r 2, "
                   "Vulkan with cooperative matrices off (F16, Q8_0, Q4_0) and on (Q4_0), and -ngl 0 (CPU)",
        "what_it_says": says + [
            "Round %d of %d (the first compiles every pipeline); llama.cpp %s, ggml Vulkan backend %s, in one Debian "
            "sid root with diffvk's host build. llama.cpp's Q4_0 keeps its output matrix at Q6_K, diffvk's at Q8_0."
            % (a.round, a.rounds, a.llama, a.ggml)],
        "tables": [{
            "caption": "tokens/s, 128-token prompt then 32 decoded tokens (llama.cpp: the better of cooperative "
                       "matrices off and on)",
            "columns": ["weights", "diffvk prefill", "llama.cpp Vulkan prefill", "ratio", "diffvk decode",
                        "llama.cpp Vulkan decode", "ratio", "diffvk decode, % of copy ceiling",
                        "llama.cpp CPU decode"],
            "rows": rows,
        }],
        "notes": {"raw": [raw(w) for w in ("diffvk", "llama-vk", "llama-vk-coopmat", "llama-cpu")],
                  "copy_ceiling_gbps": copy},
    }
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    sys.exit(main())
