#!/usr/bin/python3
"""Writes BENCHMARKS.md from the result files in docs/benchmarks/results/ (Python 3 standard library only).

    /usr/bin/python3 docs/benchmarks/generate.py                  # rewrite BENCHMARKS.md
    /usr/bin/python3 docs/benchmarks/generate.py --output FILE    # write elsewhere (.ci/check-benchmarks)
    /usr/bin/python3 docs/benchmarks/generate.py --results DIR    # read other result files

A result file is one JSON object (format: docs/benchmarks/README.md):
  schema 1; title, benchmark, device, driver, date (YYYY-MM-DD), commit, command (all required);
  what_it_says (list of short sentences); current (default true; false = listed among the older results only);
  and the figures, one of:
    "bench": the document `diffvk bench --json` wrote (attention or `--model`), unchanged;
    "bench_file": the path of such a document, relative to the result file;
    "tables": [{"caption"?: str, "columns": [str], "rows": [[str]]}] (transcribed figures);
  optional "output" (verbatim text the tool printed) and "notes" (context, not rendered).

For every (device, driver) one section lists the current result of each benchmark: the newest file (by date, then
file name) among those not marked "current": false. Every other file is listed under "Older results".
The output depends only on the files, so .ci/check-benchmarks can compare it with the committed BENCHMARKS.md.
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
REQUIRED = ('title', 'benchmark', 'device', 'driver', 'date', 'commit', 'command')


class ResultError(Exception):
    pass


def load_results(results_dir):
    docs = []
    for name in sorted(os.listdir(results_dir)):
        if not name.endswith('.json'):
            continue
        path = os.path.join(results_dir, name)
        with open(path, encoding='utf-8') as fh:
            try:
                doc = json.load(fh)
            except json.JSONDecodeError as e:
                raise ResultError(f'{name}: not JSON ({e})')
        if not isinstance(doc, dict) or doc.get('schema') != 1:
            raise ResultError(f'{name}: not a result file (needs "schema": 1)')
        missing = [k for k in REQUIRED if not str(doc.get(k, '')).strip()]
        if missing:
            raise ResultError(f'{name}: missing {", ".join(missing)} (every figure keeps its device and driver)')
        if 'bench_file' in doc:
            bench_path = os.path.normpath(os.path.join(results_dir, doc['bench_file']))
            with open(bench_path, encoding='utf-8') as fh:
                doc['bench'] = json.load(fh)
        if not any(doc.get(k) for k in ('bench', 'tables', 'output', 'notes')):
            raise ResultError(f'{name}: no figures ("bench", "bench_file", "tables", "output" or "notes")')
        doc['_file'] = name
        docs.append(doc)
    return docs


def cell(v):
    if v is None:
        return '—'
    if isinstance(v, float):
        v = f'{v:.3g}' if abs(v) < 1 else (f'{v:.1f}' if abs(v) < 1e5 else f'{v:.0f}')
    return str(v).replace('|', '\\|').replace('\n', ' ')


def md_table(columns, rows):
    out = ['| ' + ' | '.join(cell(c) for c in columns) + ' |', '|' + '---|' * len(columns)]
    for r in rows:
        r = list(r) + [''] * (len(columns) - len(r))
        out.append('| ' + ' | '.join(cell(c) for c in r) + ' |')
    return out


def ratio(a, b):
    return f'{a / b:.2f}' if a and b else '—'


def median_us(impl):
    if not impl or not impl.get('ran', True) or impl.get('skipped'):
        return None
    return (impl.get('time') or {}).get('median_us')


def attention_tables(bench):
    """The attention benchmark (`diffvk bench --json`): ceilings, then one row per case."""
    lines = []
    ce = bench.get('ceilings') or {}
    parts = []
    copy = ce.get('copy') or {}
    if copy.get('GBps') is not None:
        parts.append(f'copy {copy["GBps"]:.2f} GB/s')
    for key, label in (('fma_f32_gflops', 'fp32 FMA'), ('fma_f16_gflops', 'fp16 FMA')):
        v = ce.get(key)
        if isinstance(v, (int, float)):
            parts.append(f'{label} {v:.1f} GFLOP/s')
    mm = ce.get('matmul') or {}
    if mm.get('GFLOPs') is not None:
        parts.append(f'matmul {mm["GFLOPs"]:.2f} GFLOP/s')
    if parts:
        lines += ['Ceilings: ' + ', '.join(parts) + '.', '']
    cases = bench.get('cases', [])
    plain = any('plain 2H' in c.get('implementations', {}) for c in cases)  # DIFF V2: plain attention, 2H heads
    cols = ['phase', 'variant', 'D', 'T', 'H/Hkv', 'fused µs', 'two-pass µs', 'naive µs', 'fused × two-pass',
            'fused × naive', 'fused %copy', 'checked'] + (['plain 2H µs'] if plain else [])
    rows = []
    for c in cases:
        im = c.get('implementations', {})
        f, t, n = (median_us(im.get(k)) for k in ('fused', 'two-pass', 'naive'))
        p2 = median_us(im.get('plain 2H'))
        fused = im.get('fused') or {}
        pct = fused.get('pct_copy_bandwidth', fused.get('fraction_of_copy_ceiling'))
        if pct is not None and 'fraction_of_copy_ceiling' in fused and 'pct_copy_bandwidth' not in fused:
            pct = 100 * pct
        rows.append([c.get('phase'), c.get('variant', 'v1'), c.get('D'), c.get('T'), f'{c.get("H")}/{c.get("Hkv")}',
                     f'{f:.1f}' if f else '—', f'{t:.1f}' if t else '—', f'{n:.1f}' if n else '—',
                     ratio(t, f), ratio(n, f), f'{pct:.1f}%' if pct is not None else '—',
                     'ok' if c.get('outputs_checked') else 'FAILED']
                    + ([f'{p2:.1f}' if p2 else '—'] if plain else []))
    lines += md_table(cols, rows)
    return lines


def model_row(name, d):
    pre, dec = d.get('prefill') or {}, d.get('decode') or {}
    frac = dec.get('fraction_of_bound')
    return [name, d.get('kv_cache', '—'), d.get('bits_per_weight'), pre.get('tokens'), pre.get('tokens_per_s'),
            dec.get('tokens'), dec.get('tokens_per_s'), f'{100 * frac:.1f}%' if frac is not None else '—',
            d.get('peak_device_bytes')]


def model_tables(bench):
    """`diffvk bench --model --json`: one row per weight type, then the decode profile if present."""
    m = bench.get('model') or {}
    name = m.get("dir") or (f'shape {m["shape"]}, random weights' if m.get("shape") else "?")
    lines = [f'Model: `{name}` ({m.get("num_layers")} layers, E = {m.get("hidden_size")}, '
             f'H/Hkv = {m.get("num_heads")}/{m.get("num_kv_heads")}); copy ceiling '
             f'{bench.get("copy_gbps", 0):.2f} GB/s.', '']
    cols = ['weights', 'KV cache', 'bits/weight', 'prompt tokens', 'prefill tok/s', 'decoded tokens', 'decode tok/s',
            'decode % of weight-streaming bound', 'peak device bytes']
    if 'weight_types' in bench:
        rows = [model_row(d.get('weights', '?'), d) for d in bench['weight_types']]
    else:
        rows = [model_row(bench.get('weights', 'storage type'), bench)]
    lines += md_table(cols, rows)
    cold = bench.get('cold_start')
    if cold:
        lines += ['', f'First use in the process: load {cold.get("load_seconds", 0):.3f} s, session '
                      f'{cold.get("session_create_seconds", 0):.3f} s, first prefill {cold.get("first_prefill_seconds", 0):.3f} s: '
                      f'{cold.get("time_to_first_token_seconds", 0):.3f} s to the first token; '
                      f'{cold.get("pipelines_compiled")} pipelines created in {cold.get("pipeline_compile_seconds", 0):.3f} s; '
                      f'pipeline cache {cold.get("pipeline_cache")}'
                      + (f'; the self-test at context creation {cold.get("selftest")}'
                         + (f' ({cold.get("selftest_seconds", 0):.3f} s; with it, '
                            f'{cold.get("time_to_first_token_with_selftest_seconds", 0):.3f} s to the first token)'
                            if cold.get("selftest") == "ran" else '')
                         if 'selftest' in cold else '') + '.']
    prof = bench.get('decode_profile')
    if prof:
        lines += ['', 'Decode step, GPU time per op (`--profile`):', '']
        lines += md_table(['op', 'dispatches per token', 'µs per token', 'µs per dispatch'],
                          [[p.get('op'), p.get('dispatches_per_token'), p.get('us_per_token'), p.get('us_per_dispatch')]
                           for p in prof])
    return lines


def bench_tables(doc):
    bench = doc['bench']
    if 'cases' in bench:
        return attention_tables(bench)
    if 'decode' in bench or 'weight_types' in bench:
        return model_tables(bench)
    raise ResultError(f'{doc["_file"]}: "bench" is neither an attention nor a --model document')


def render_result(doc):
    lines = [f'### {doc["title"]}', '']
    lines.append(f'Command: `{doc["command"]}`  ')
    lines.append(f'Commit `{doc["commit"]}`, {doc["date"]}; '
                 f'file [{doc["_file"]}](docs/benchmarks/results/{doc["_file"]}).')
    lines.append('')
    if 'bench' in doc:
        lines += bench_tables(doc)
        lines.append('')
    for t in doc.get('tables', []):
        if t.get('caption'):
            lines += [t['caption'] + ':', '']
        lines += md_table(t['columns'], t['rows'])
        lines.append('')
    if 'bench' not in doc:
        for block in doc.get('output', []):
            lines += ['```', block, '```', '']
    says = doc.get('what_it_says') or []
    if says:
        lines.append('What it says:')
        lines += [f'- {s}' for s in says]
        lines.append('')
    return lines


def generate(docs):
    groups = {}
    for d in docs:
        groups.setdefault((d['device'], d['driver']), []).append(d)
    current = set()
    for key, ds in groups.items():
        newest = {}
        for d in ds:
            if d.get('current', True) is False:
                continue
            b = d['benchmark']
            if b not in newest or (d['date'], d['_file']) > (newest[b]['date'], newest[b]['_file']):
                newest[b] = d
        current.update(d['_file'] for d in newest.values())
    out = ['# Benchmarks', '',
           '<!-- Generated by docs/benchmarks/generate.py from docs/benchmarks/results/*.json: '
           'do not edit by hand. -->', '',
           'The current figures, one section per device and driver. Each table names the command, commit and date it '
           'comes from and links its result file. How the benchmark measures, and how to add a result: '
           '[docs/benchmarks/README.md](docs/benchmarks/README.md). Why the design follows from these figures: '
           '[docs/decisions/](docs/decisions/README.md).', '',
           'CPU Vulkan drivers (lavapipe) are used for correctness; their speed says nothing about a GPU\'s, '
           'and on the shared 2-core machine their figures swing by up to ±50% between runs: '
           'compare ratios within one run.', '']
    for key in sorted(groups, key=lambda k: (k[0].lower(), k[1].lower())):
        cur = sorted((d for d in groups[key] if d['_file'] in current), key=lambda d: (d['benchmark'], d['_file']))
        if not cur:
            continue
        out += [f'## {key[0]} — {key[1]}', '']
        for d in cur:
            out += render_result(d)
    older = sorted((d for d in docs if d['_file'] not in current), key=lambda d: (d['date'], d['_file']), reverse=True)
    if older:
        out += ['## Older results', '',
                'Earlier runs, before-and-after comparisons and superseded figures, kept as result files:', '']
        out += md_table(['date', 'result', 'device', 'driver', 'commit'],
                        [[d['date'], f'[{d["title"]}](docs/benchmarks/results/{d["_file"]})', d['device'], d['driver'],
                          f'`{d["commit"]}`'] for d in older])
        out.append('')
    return '\n'.join(out).rstrip('\n') + '\n'


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--results', default=os.path.join(HERE, 'results'))
    ap.add_argument('--output', default=os.path.join(ROOT, 'BENCHMARKS.md'))
    a = ap.parse_args(argv)
    try:
        text = generate(load_results(a.results))
    except (ResultError, OSError, KeyError, TypeError, ValueError) as e:
        print(f'generate.py: {e}', file=sys.stderr)
        return 1
    tmp = a.output + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as fh:
        fh.write(text)
    os.replace(tmp, a.output)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
