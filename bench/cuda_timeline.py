#!/usr/bin/env python3
"""Where a CUDA program's steps spend their time, from a bench/cuda_timeline.cpp trace.

    bench/cuda_timeline.py TRACE.tsv [--split REGEX] [--gap-us US] [--top N] [--json OUT]

The trace is cut into steps at the end of each kernel whose name matches --split (by default the
token selection that ends every forward call of the engine). Steps with many more kernels than
the typical one are calls of their own (prefill chunks) and are reported one by one; the rest are
decode steps, reported as medians over the steps. For each: the wall time, the time the device
was busy (the union of kernels, copies and memsets on every stream), the kernels' own time, the
copies by direction, the host's blocking synchronisations, and the idle gaps over --gap-us,
named by the kernels on either side and by what the host was doing in them (the CUDA calls it
made, or none: host work). Only the standard library is used, so it runs wherever Python does.
"""
import argparse
import bisect
import collections
import json
import re
import statistics
import sys

COPY_KINDS = {1: "H2D", 2: "D2H", 8: "D2D", 10: "P2P"}
BLOCKING_SYNCS = {1: "event sync", 3: "stream sync", 4: "context sync"}


def load(path):
    records = {"K": [], "C": [], "S": [], "A": [], "Y": []}
    with open(path, errors="replace") as f:
        for line_no, line in enumerate(f, 1):
            if line.startswith("#") or not line.strip():
                continue
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 9:
                sys.exit(f"{path}:{line_no}: expected 9 tab-separated fields, got {len(parts)}")
            kind, start, end, who, _corr, graph, nbytes, detail, name = parts
            if kind not in records:
                sys.exit(f"{path}:{line_no}: unknown record kind {kind!r} (K, C, S, A or Y)")
            try:
                rec = (int(start), int(end), int(who), int(graph), int(nbytes), int(detail), name)
            except ValueError as e:
                sys.exit(f"{path}:{line_no}: a numeric field is not an integer ({e})")
            if rec[1] < rec[0]:
                sys.exit(f"{path}:{line_no}: end_ns {rec[1]} is before start_ns {rec[0]}")
            records[kind].append(rec)
    for kind in records.values():
        kind.sort()
    return records["K"], records["C"], records["S"], records["A"], records["Y"]


def short(name):
    """A kernel's name without its namespace, template arguments and parameters."""
    base = name.replace("(anonymous namespace)", "").split("(")[0]
    depth, out = 0, []
    for ch in base:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    words = "".join(out).split("::")[-1].split()
    return words[-1] if words else name


def union(intervals):
    """Merged, sorted (start, end) intervals."""
    merged = []
    for s, e in sorted(intervals):
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    return merged


def inside(records, lo, hi):
    """Records (sorted by start) that start in [lo, hi)."""
    return records[bisect.bisect_left(records, (lo,)):bisect.bisect_left(records, (hi,))]


def step_figures(lo, hi, kernels, copies, memsets, apis, syncs, gap_ns):
    ks, cs, ms = inside(kernels, lo, hi), inside(copies, lo, hi), inside(memsets, lo, hi)
    busy = union([(r[0], min(r[1], hi)) for r in ks + cs + ms])
    busy_ns = sum(e - s for s, e in busy)
    gaps = []
    edge = lo
    device = sorted(ks + cs + ms)
    by_end = sorted(device, key=lambda r: r[1])
    ends = [r[1] for r in by_end]
    window = inside(apis, lo - 20_000_000, hi)  # and calls begun up to 20 ms before it
    for s, e in busy + [[hi, hi]]:
        if s - edge > gap_ns:
            before = ends and bisect.bisect_right(ends, edge)
            after = bisect.bisect_left(device, (s,))
            host = collections.Counter(short_api(a[6]) for a in window
                                       if edge <= a[0] < s or a[0] < edge < a[1])
            gaps.append({
                "us": (s - edge) / 1e3,
                "after": label(by_end[before - 1]) if before else "(step start)",
                "before": label(device[after]) if after < len(device) else "(step end)",
                "host": ", ".join(f"{n}×{c}" if c > 1 else n for n, c in host.most_common(3))
                or "no CUDA call (host work)",
            })
        edge = max(edge, e)
    copy_by = collections.defaultdict(lambda: [0, 0, 0.0])
    for r in cs:
        c = copy_by[COPY_KINDS.get(r[5], str(r[5]))]
        c[0] += 1
        c[1] += r[4]
        c[2] += (r[1] - r[0]) / 1e3
    blocked = sum(min(r[1], hi) - r[0] for r in inside(syncs, lo, hi) if r[5] in BLOCKING_SYNCS)
    by_kernel = collections.Counter()
    for r in ks:
        by_kernel[short(r[6])] += (r[1] - r[0]) / 1e3
    return {
        "wall_us": (hi - lo) / 1e3,
        "busy_us": busy_ns / 1e3,
        "kernels": len(ks),
        "kernel_us": sum(r[1] - r[0] for r in ks) / 1e3,
        "graph_kernels": sum(1 for r in ks if r[3]),
        "copies": {k: {"count": v[0], "bytes": v[1], "us": v[2]} for k, v in copy_by.items()},
        "blocked_us": blocked / 1e3,
        "api_calls": len(inside(apis, lo, hi)),
        "gaps": gaps,
        "by_kernel": dict(by_kernel),
    }


def short_api(name):
    return re.sub(r"_v\d+$", "", name)


def label(record):
    if len(record) == 7 and record[6]:
        return short(record[6])
    return "copy" if record[4] else "device work"


def turnaround(lo, hi, kernels, apis):
    """The host's CUDA calls from the end of the previous step's token selection (lo) to this
    step's first kernel: reading the token back, the host's own work, the uploads and the launch,
    while the device waits. Returns {call: [count, µs]} and the launch latency (the last call's
    end to the first kernel's start)."""
    first_kernel = min((r[0] for r in inside(kernels, lo, hi)), default=None)
    if first_kernel is None:
        return {}, 0.0
    tail = lo
    calls = collections.defaultdict(lambda: [0, 0.0])
    last_end = tail
    for a in inside(apis, tail, first_kernel):
        c = calls[short_api(a[6])]
        c[0] += 1
        c[1] += (min(a[1], first_kernel) - a[0]) / 1e3
        last_end = max(last_end, min(a[1], first_kernel))
    calls["(wall: previous token selection to first kernel)"] = [1, (first_kernel - tail) / 1e3]
    return dict(calls), (first_kernel - last_end) / 1e3


def gap_table(steps, top):
    totals = collections.defaultdict(lambda: [0.0, 0])
    for st in steps:
        for g in st["gaps"]:
            key = (g["after"], g["before"], g["host"])
            totals[key][0] += g["us"]
            totals[key][1] += 1
    n = len(steps)
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
    return [{"after": a, "before": b, "host": h, "us_per_step": us / n, "per_step": c / n}
            for (a, b, h), (us, c) in rows]


def print_step(title, st, top):
    print(f"\n{title}")
    idle = st["wall_us"] - st["busy_us"]
    print(f"  wall {st['wall_us']:.1f} µs, device busy {st['busy_us']:.1f} "
          f"({100 * st['busy_us'] / st['wall_us']:.0f}%), idle {idle:.1f}; "
          f"{st['kernels']:.0f} kernels ({st['graph_kernels']:.0f} in graphs) "
          f"summing {st['kernel_us']:.1f} µs; {st['api_calls']:.0f} CUDA calls; "
          f"host blocked in syncs {st['blocked_us']:.1f} µs")
    for kind, c in sorted(st["copies"].items()):
        print(f"  copies {kind}: {c['count']:.0f}, {c['bytes'] / 1e6:.3f} MB, {c['us']:.1f} µs")
    print("  kernels by time:")
    for name, us in sorted(st["by_kernel"].items(), key=lambda kv: -kv[1])[:top]:
        print(f"    {us:9.1f} µs  {100 * us / max(st['kernel_us'], 1e-9):5.1f}%  {name}")


def print_gaps(rows, st):
    listed = sum(r["us_per_step"] for r in rows)
    print(f"  idle gaps (µs per step, gaps per step: after → before; what the host did); "
          f"{st['wall_us'] - st['busy_us'] - listed:.1f} µs of idle is in shorter or unlisted gaps:")
    for r in rows:
        print(f"    {r['us_per_step']:8.1f}  {r['per_step']:5.2f}  {r['after']} → {r['before']}; "
              f"{r['host']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--split", default=r"(greedy|select)_kernel",
                    help="regex on kernel names: a step ends with each matching kernel")
    ap.add_argument("--gap-us", type=float, default=2.0, help="report idle gaps longer than this")
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--skip", type=int, default=2,
                    help="decode steps left out after each long call (first launches, captures)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args()

    try:
        kernels, copies, memsets, apis, syncs = load(args.trace)
    except OSError as e:
        sys.exit(f"{args.trace}: cannot read: {e.strerror}")
    if not kernels:
        sys.exit(f"{args.trace}: no kernel records")
    split = re.compile(args.split)
    ends = [r[1] for r in kernels if split.search(r[6])]
    if not ends:
        sys.exit(f"{args.trace}: no kernel matches --split {args.split!r}")
    bounds = [kernels[0][0]] + ends
    steps = [step_figures(lo, hi, kernels, copies, memsets, apis, syncs, args.gap_us * 1e3)
             for lo, hi in zip(bounds, bounds[1:])]
    typical = statistics.median(st["kernels"] for st in steps)
    typical_wall = statistics.median(st["wall_us"] for st in steps)
    long_ids = [i for i, st in enumerate(steps)
                if st["kernels"] > 2 * typical or st["wall_us"] > 5 * typical_wall]
    decode, decode_bounds, skip_until = [], [], -1
    for i, st in enumerate(steps):
        if i in long_ids:
            skip_until = i + args.skip
        elif i > skip_until:
            decode.append(st)
            decode_bounds.append((bounds[i], bounds[i + 1]))

    print(f"{args.trace}: {len(kernels)} kernels, {len(copies)} copies, {len(apis)} CUDA calls, "
          f"{len(steps)} steps ({len(long_ids)} long calls, {len(decode)} decode steps kept)")
    out = {"long_calls": [], "decode": None}
    for i in long_ids:
        st = steps[i]
        print_step(f"long call (step {i}):", st, args.top)
        rows = gap_table([st], args.top)
        print_gaps(rows, st)
        out["long_calls"].append({**st, "gap_table": rows})
    if decode:
        med = {k: statistics.median(st[k] for st in decode)
               for k in ("wall_us", "busy_us", "kernels", "kernel_us", "graph_kernels",
                         "blocked_us", "api_calls")}
        kinds = {k for st in decode for k in st["copies"]}
        med["copies"] = {k: {f: statistics.median(st["copies"].get(k, {}).get(f, 0)
                                                   for st in decode)
                             for f in ("count", "bytes", "us")} for k in kinds}
        names = {n for st in decode for n in st["by_kernel"]}
        med["by_kernel"] = {n: sum(st["by_kernel"].get(n, 0) for st in decode) / len(decode)
                            for n in names}
        print_step(f"decode steps (median of {len(decode)}; kernels by mean time):", med, args.top)
        rows = gap_table(decode, args.top)
        print_gaps(rows, med)
        turns = [turnaround(lo, hi, kernels, apis) for lo, hi in decode_bounds]
        names = {n for t, _ in turns for n in t}
        print("  a step's start: the host's CUDA calls from the previous token selection's end to "
              "the step's first kernel (median count, median µs):")
        table = {}
        for n in names:
            count = statistics.median(t.get(n, [0, 0])[0] for t, _ in turns)
            us = statistics.median(t.get(n, [0, 0])[1] for t, _ in turns)
            table[n] = {"count": count, "us": us}
        for n, v in sorted(table.items(), key=lambda kv: -kv[1]["us"]):
            print(f"    {v['us']:8.1f} µs  {v['count']:5.1f}×  {n}")
        latency = statistics.median(l for _, l in turns)
        print(f"    {latency:8.1f} µs  from the host's last call to the first kernel")
        med["turnaround"] = table
        med["launch_latency_us"] = latency
        out["decode"] = {**med, "steps": len(decode), "gap_table": rows}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
