#!/usr/bin/env python3
"""Builds or settings against each other on one machine, interleaved (docs/benchmarks.md, "A/B
runs"): these machines drift by more than most changes buy, so each round runs every variant
once per regime, in an order that rotates from round to round, and the table compares the
variants' warm runs from the same rounds.

    bench/ab.py STORE --variant NAME=BINARY[,FLAG...] ... --regime NAME=FLAGS ...
                [--rounds 2] [--json OUT]

A variant is a `cherenkov` binary and flags of its own (`after=.gpu/bin/cherenkov` or
`bulk=.gpu/bin/cherenkov,--tuning,expert_layer=off`); the first is the baseline. A regime is the
`cherenkov bench` flags every variant runs with (`prefill512=--backend cuda --pool-gb max
--prompt-tokens 512 --gen-tokens 8 --repeat 3`). Each run is `BINARY bench STORE --json REGIME
VARIANT`; its first repeat fills the expert pool and the caches, so only the later repeats count
(all of them when --repeat is 1). The table gives, per regime, prefill and decode tok/s as the
range of every counted repeat over the rounds, and each variant's median over the baseline's.
A failed run is reported with its stderr's last line, and the script then exits 1.
"""
import argparse
import json
import shlex
import statistics
import subprocess
import sys

METRICS = (("prefill", "prefill_tokens_per_second"), ("decode", "decode_tokens_per_second"))


def named(text, what):
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise argparse.ArgumentTypeError(f"{what} '{text}': expected NAME=VALUE")
    return name, value


def variant(text):
    name, value = named(text, "--variant")
    binary, *flags = value.split(",")
    return name, binary, flags


def regime(text):
    name, value = named(text, "--regime")
    return name, shlex.split(value)


def counted(report):
    """The repeats that count: all but the first (it warms the pool), or the only one."""
    runs = report.get("runs") or []
    return runs[1:] if len(runs) > 1 else runs


def run_once(binary, store, regime_flags, variant_flags):
    command = [binary, "bench", store, "--json", *regime_flags, *variant_flags]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"exit {result.returncode}: {last}"
    try:
        return json.loads(result.stdout), None
    except json.JSONDecodeError as error:
        return None, f"output is not JSON ({error})"


def measure(store, variants, regimes, rounds, log):
    """{regime: {variant: {metric: [rates]}}} and the failures, runs interleaved round by round."""
    rates = {r: {v: {m: [] for m, _ in METRICS} for v, _, _ in variants} for r, _ in regimes}
    failures = []
    for round_index in range(rounds):
        # The order rotates, so no variant always runs first (or right after another).
        shift = round_index % len(variants)
        order = variants[shift:] + variants[:shift]
        for regime_name, regime_flags in regimes:
            for name, binary, flags in order:
                log(f"round {round_index + 1}/{rounds}: {regime_name} {name}")
                report, error = run_once(binary, store, regime_flags, flags)
                if error:
                    failures.append(f"{regime_name} {name} (round {round_index + 1}): {error}")
                    continue
                for metric, key in METRICS:
                    rates[regime_name][name][metric] += [run[key] for run in counted(report)
                                                         if run.get(key)]
    return rates, failures


def cell(values):
    if not values:
        return "-"
    low, high = min(values), max(values)
    return f"{low:,.1f}" if low == high else f"{low:,.1f}-{high:,.1f}"


def table(rates, variants, regimes):
    names = [name for name, _, _ in variants]
    base = names[0]
    head = ["regime", "metric", *names, *[f"{n} / {base}" for n in names[1:]]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for regime_name, _ in regimes:
        for metric, _ in METRICS:
            by_variant = rates[regime_name]
            if not any(by_variant[n][metric] for n in names):
                continue
            cells = [cell(by_variant[n][metric]) for n in names]
            base_values = by_variant[base][metric]
            for n in names[1:]:
                values = by_variant[n][metric]
                cells.append(f"{statistics.median(values) / statistics.median(base_values):.3f}"
                             if values and base_values else "-")
            lines.append("| " + " | ".join([regime_name, metric, *cells]) + " |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store")
    parser.add_argument("--variant", type=variant, action="append", required=True)
    parser.add_argument("--regime", type=regime, action="append", required=True)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", help="also write the rates and failures here")
    args = parser.parse_args(argv)
    names = [name for name, _, _ in args.variant]
    if len(set(names)) != len(names) or len({n for n, _ in args.regime}) != len(args.regime):
        parser.error("variant and regime names must be unique")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    rates, failures = measure(args.store, args.variant, args.regime, args.rounds,
                              lambda line: print(line, file=sys.stderr, flush=True))
    print(table(rates, args.variant, args.regime))
    for failure in failures:
        print(f"failed: {failure}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rates": rates, "failures": failures,
                       "variants": {n: [b, *fl] for n, b, fl in args.variant},
                       "regimes": dict(args.regime), "rounds": args.rounds}, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
