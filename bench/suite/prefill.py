"""`scripts/bench-suite prefill --before BIN --after BIN --model M --out DIR`: the paired prefill
comparison (seed "Paired prefill"). Three prompt lengths x Q4/Q3/Q2 (or one mixed setting,
--configs 4/2 or 4/3, without a deadline cut), both binaries each round, their order reversed
every other round; each sample a fresh process generating eight tokens to check the decode
handoff. Q4 output must be identical between the binaries; low-bit prefill may change it."""
import datetime
import sys
from pathlib import Path

from . import machine, report_file
from .engine_cli import Engine, binary_sha256, model_identity, parse_generation_stderr, present_tables, store_work
from .errors import SuiteError, UsageError
from .files import sha256_text, write_atomic
from .sample_process import run_watched
from .sample_record import median, memory_figure
from .scrub import Scrubber
from .source_info import source_info
from .suite_file import load_suite

REPO = Path(__file__).resolve().parents[2]
GENERATED_TOKENS = 8
UNIFORM = [("q4", "Q4", ["--experts", "4"], [4]), ("q3", "Q3", ["--experts", "3"], [3]),
           ("q2", "Q2", ["--experts", "2"], [2])]
MIXED = {"4/2": [("q4-miss2", "Q4 residents, Q2 misses", ["--experts", "4", "--miss-experts", "2"], [4, 2])],
         "4/3": [("q4-miss3", "Q4 residents, Q3 misses", ["--experts", "4", "--miss-experts", "3"], [4, 3])]}


def _lengths(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise UsageError(f"--lengths {text}: expected comma-separated token counts") from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"--lengths {text}: every length must be at least 1")
    return values


def _prompts(engine, base_text, lengths):
    """Raw prompts of about each length: the base text's first N tokens, detokenized; the
    report keeps the count the text really encodes to."""
    ids = engine.tokenize_text(base_text)
    if not ids:
        raise SuiteError("the prefill base text encodes to no tokens")
    prompts = {}
    for length in lengths:
        take = (ids * (length // len(ids) + 1))[:length]
        text = engine.detokenize(take)
        if text.endswith("\n"):
            text = text[:-1]
        prompts[str(length)] = {"text": text, "tokens": len(engine.tokenize_text(text)), "sha256": sha256_text(text)}
    return prompts


def run_prefill(opts):
    if opts.rounds < 1:
        raise UsageError("--rounds: must be at least 1")
    if opts.configs is not None and opts.configs not in MIXED:
        raise UsageError(f"--configs {opts.configs}: must be 4/2 or 4/3")
    configs = MIXED[opts.configs] if opts.configs else UNIFORM
    lengths = _lengths(opts.lengths)
    binaries = {}
    for label, given in (("before", opts.before), ("after", opts.after)):
        path = Path(given)
        if not path.is_file():
            raise UsageError(f"--{label} {given}: not a file")
        binaries[label] = path
    out = Path(opts.out)
    if (out / "report.json").exists():
        raise SuiteError(f"{out / 'report.json'} exists: choose another --out")
    engine = Engine(binaries["after"], opts.model, opts.root)
    inspected = engine.inspect()
    store_dir = inspected.get("path")
    identity = model_identity(engine, inspected)
    tables = present_tables(store_dir)
    missing = sorted({b for c in configs for b in c[3]} - tables, reverse=True)
    if missing:
        raise SuiteError("prepare the selected low-bit stores first: the store has no Q" + "/Q".join(map(str, missing))
                         + f" table (cherenkov prepare {opts.model} --experts 4,3,2)")
    suite = load_suite(opts.suite or REPO / "bench" / "suite.json")
    base = next((c.prompt for c in suite.cases if c.name == "long-prefill"), None)
    if base is None:
        raise SuiteError(f"{suite.path}: no long-prefill case to take the prefill prompts from")
    prompts = _prompts(engine, base, lengths)
    for key, entry in prompts.items():
        if entry["tokens"] + GENERATED_TOKENS + 2 > opts.context:
            raise SuiteError(f"prompt of {entry['tokens']} tokens + {GENERATED_TOKENS} does not fit --context {opts.context}")

    scrub = Scrubber()
    for label, path in binaries.items():
        scrub.add(path, f"<{label}>")
    if Path(opts.model).exists():
        scrub.add(opts.model, "<model>")
    scrub.add(opts.root, "<root>")
    scrub.add(store_dir, "<store>")
    scrub.add(engine.paths().get("data"), "<data>")
    scrub.add(out, "<output>")
    scrub.add_defaults()
    detail = machine.hardware_detail(store_dir)
    detail["expert_read"] = machine.read_sample(store_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = {"format": report_file.FORMAT, "kind": "prefill", "version": 1,
              "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "signature": {"model": identity, "binaries": {k: binary_sha256(v) for k, v in binaries.items()}},
              "provenance": scrub.json({"hardware_detail": detail, "source": source_info(REPO),
                                        "binaries": {k: {"path": f"<{k}>", "sha256": binary_sha256(v)} for k, v in binaries.items()},
                                        "model": {"argument": "<model>", "identity": identity}}),
              "settings": {"context": opts.context, "drafts": 2, "generated_tokens": GENERATED_TOKENS,
                           "rounds": opts.rounds, "configs": [c[0] for c in configs], "lengths": lengths},
              "prompts": prompts, "samples": [], "output_checks": []}
    memory_total = detail.get("memory_bytes")
    for round_number in range(1, opts.rounds + 1):
        order = ["before", "after"] if round_number % 2 else ["after", "before"]
        for length in lengths:
            prompt = prompts[str(length)]
            for name, _label, args, _bits in configs:
                for which in order:
                    sample_id = f"r{round_number}-{length}-{name}-{which}"
                    command = [str(binaries[which]), opts.model, prompt["text"], "--raw", "--no-eos",
                               "--max-tokens", str(GENERATED_TOKENS), "--max-ctx", str(opts.context), "--drafts", "2",
                               *args, "--no-build-missing-store", *(["--root", str(opts.root)] if opts.root else [])]
                    process = run_watched(command, 30.0, 30.0)
                    figures = parse_generation_stderr(process.stderr)
                    output = process.stdout.decode("utf-8", "replace")
                    record = {"id": sample_id, "round": round_number, "length": length, "prompt_tokens": prompt["tokens"],
                              "config": name, "binary": which, "exit_code": process.exit_code, "wall_s": process.wall_s,
                              "power": process.power_readings, "output": output[:-1] if output.endswith("\n") else output,
                              "load_s": figures.get("load_s"), "prefill": figures.get("prefill"),
                              "decode": figures.get("decode"),
                              "memory": memory_figure(figures.get("memory_stats"), memory_total)}
                    if store_work(process.stderr):
                        record.update(status="invalid", error="a store was built during the sample")
                    elif process.power_changed:
                        record.update(status="invalid", error="the power source changed")
                    elif process.exit_code != 0 or not figures.get("prefill"):
                        record.update(status="invalid", error="\n".join(process.stderr.strip().splitlines()[-3:]))
                    else:
                        record["status"] = "ok"
                    report["samples"].append(scrub.json(record))
                    print(f"bench-suite prefill: {sample_id}: {record['status']}"
                          + (f", {record['prefill']['tok_s']:.1f} tok/s" if record.get("prefill") else ""), file=sys.stderr)
                    report_file.save(out, report)
        for length in lengths:
            pair = {r["binary"]: r for r in report["samples"]
                    if r["round"] == round_number and r["length"] == length and r["config"] == "q4" and r["status"] == "ok"}
            if len(pair) == 2:
                report["output_checks"].append({"round": round_number, "length": length,
                                                "prompt_tokens": prompts[str(length)]["tokens"],
                                                "identical": pair["before"]["output"] == pair["after"]["output"]})
    report["complete"] = True
    report_file.save(out, report)
    write_atomic(out / "summary.md", render_prefill_summary(report, configs))
    print(f"bench-suite prefill: done: {out / 'summary.md'}", file=sys.stderr)
    failed = [c for c in report["output_checks"] if not c["identical"]]
    return 1 if failed else 0


def render_prefill_summary(report, configs):
    labels = {c[0]: c[1] for c in configs}
    valid = [r for r in report["samples"] if r["status"] == "ok"]
    lines = ["Hardware: " + machine.describe(report["provenance"]["hardware_detail"]), "",
             "# Prefill comparison", "",
             f"The report contains {len(valid)} valid samples of {len(report['samples'])}. The medians exclude loading "
             f"and conversion. Each sample generated {GENERATED_TOKENS} tokens to check the decode handoff; binary order "
             "alternated between rounds.", "",
             "| Prompt tokens | Experts | Before tok/s | After tok/s | Change |", "|---:|---|---:|---:|---:|"]
    for length in report["settings"]["lengths"]:
        for name in report["settings"]["configs"]:
            rates = {}
            for which in ("before", "after"):
                rates[which] = median([r["prefill"]["tok_s"] for r in valid
                                       if r["length"] == length and r["config"] == name and r["binary"] == which])
            change = (f"{(rates['after'] / rates['before'] - 1) * 100:+.1f}%"
                      if rates["before"] and rates["after"] else "–")
            tokens = report["prompts"][str(length)]["tokens"]
            lines.append(f"| {tokens} | {labels.get(name, name)} | "
                         + " | ".join(f"{rates[w]:,.2f}" if rates[w] else "–" for w in ("before", "after"))
                         + f" | {change} |")
    if report["output_checks"]:
        lines += ["", "## Output checks", ""]
        for check in report["output_checks"]:
            verdict = "the Q4 outputs are identical" if check["identical"] else "the Q4 outputs DIFFER"
            lines.append(f"- Round {check['round']}, {check['prompt_tokens']} tokens: {verdict}.")
    elif "q4" not in report["settings"]["configs"]:
        lines += ["", "Low-bit prefill may change output; only Q4 output is compared."]
    invalid = [r for r in report["samples"] if r["status"] != "ok"]
    if invalid:
        lines += ["", "## Invalid samples", ""] + [f"- `{r['id']}`: {r.get('error', '')}" for r in invalid]
    lines += ["", "Binary hashes, timings, prompts, outputs and power readings are in report.json."]
    return "\n".join(lines) + "\n"
