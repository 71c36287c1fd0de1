"""summary.md: the hardware facts on its first line (so runs from different machines sit side by
side), then medians of prefill and decode rates, answer length, completion time and memory per
workload and setting over the valid samples, the pelicans' SVG rates, and every exclusion."""
from pathlib import Path

from .files import write_atomic
from .machine import describe
from .sample_record import median

REASONS = {"capped": "capped at {cap} tokens", "cycle": "stopped by the loop check ({words}-word block x4)",
           "engine-error": "engine error", "timeout": "ran past the sample time limit",
           "memory-invalid": "memory above the machine's", "power-change": "power source changed"}


def _fmt(value, digits=2):
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def _reason(record):
    text = REASONS.get(record["status"], record["status"])
    text = text.format(cap=record.get("cap"), words=(record.get("cycle") or {}).get("block_words"))
    if record.get("error") and record["status"] not in ("capped", "cycle"):
        text += ": " + record["error"].splitlines()[0][:200]
    return text


def _labels(report):
    return {c["name"]: c["label"] for c in report["suite"]["configs"]}, \
           {c["name"]: c.get("title", c["name"]) for c in report["suite"]["cases"]}


def medians_table(report, statuses=("ok",)):
    """Medians per workload and setting over the samples whose status is in `statuses`."""
    config_labels, case_titles = _labels(report)
    selection = report["selection"]
    lines = ["| Workload | Setting | Valid | Prefill tok/s | Decode tok/s | Answer tokens | Completion s | Memory GB |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for case in selection["cases"]:
        for config in selection["configs"]:
            group = [r for r in report["samples"] if r["case"] == case and r["config"] == config]
            if not group:
                continue
            valid = [r for r in group if r["status"] in statuses]
            memory = median([(r.get("memory") or {}).get("figure_bytes") for r in valid])
            lines.append("| " + " | ".join([
                case_titles.get(case, case), config_labels.get(config, config), f"{len(valid)}/{len(group)}",
                _fmt(median([r["prefill"]["tok_s"] for r in valid])),
                _fmt(median([r["decode"]["tok_s"] for r in valid])),
                _fmt(median([r.get("answer_tokens") for r in valid]), 0),
                _fmt(median([r.get("completion_s") for r in valid])),
                _fmt(memory / 1e9 if memory is not None else None)]) + " |")
    return "\n".join(lines)


def pelican_lines(report):
    config_labels, _ = _labels(report)
    pelicans = [r for r in report["samples"] if r.get("kind") == "pelican"]
    if not pelicans:
        return []
    lines = ["## Pelicans", "", "| Sample | Setting | Run | SVG | File |", "|---|---|---|---|---|"]
    for r in pelicans:
        svg = r.get("svg") or {}
        rating = svg.get("status", "–") + (f" ({svg['detail']})" if svg.get("detail") else "")
        lines.append(f"| `{r['id']}` | {config_labels.get(r['config'], r['config'])} | {r['status']} | {rating} | "
                     f"{r.get('svg_file') or r.get('answer_file')} |")
    valid = sum(1 for r in pelicans if (r.get("svg") or {}).get("status") == "valid")
    lines += ["", f"SVG rate: {valid} of {len(pelicans)} pelicans are well-formed SVG, rated apart from the run "
                  "status (a malformed or incomplete SVG is invalid whatever the sample's timing)."]
    return lines


def render_summary(report):
    prov = report["provenance"]
    identity = prov["model"]["identity"]
    settings = report["settings"]
    selection = report["selection"]
    planned = report.get("plan", [])
    valid = [r for r in report["samples"] if r["status"] == "ok"]
    lines = ["Hardware: " + describe(prov["hardware_detail"]), "", "# Cherenkov benchmark", ""]
    state = "complete" if report.get("complete") else f"incomplete: {len(planned) - len(report['samples'])} to run"
    lines.append(f"- Samples: {len(valid)} valid of {len(report['samples'])} run, {len(planned)} planned ({state}).")
    model = f"ID `{identity['model_id']}`" if identity.get("model_id") else "not in the index"
    if identity.get("alias"):
        model += f" ({identity['alias']})"
    if identity.get("source") and identity["source"].get("uri"):
        model += f", source {identity['source']['uri']}"
    lines.append(f"- Model: {model}; manifest sha256 `{identity['manifest_sha256'][:16]}`; expert tables "
                 + "/".join(f"Q{b}" for b in prov["model"].get("store_tables", [])) + ".")
    source = prov.get("source") or {}
    binary = f"- Binary sha256 `{prov['binary']['sha256'][:16]}`"
    if source.get("commit"):
        binary += f"; source commit `{source['commit'][:12]}`" + (" with local changes" if source.get("source_dirty") else "")
    lines.append(binary + ".")
    lines.append(f"- Suite sha256 `{prov['suite']['sha256'][:16]}`; mode {selection['mode'] or 'full'}; cases "
                 + ", ".join(selection["cases"]) + "; settings " + ", ".join(selection["configs"])
                 + f"; {selection['rounds']} round(s).")
    caps = ", ".join(f"{k} {v}" for k, v in settings["caps"].items())
    lines.append(f"- Each sample a fresh process: context {settings['context']} tokens, {settings['drafts']} adaptive "
                 f"drafts, adaptive expert pool, no --check, no prefix cache. Answer caps: {caps}.")
    if report.get("note"):
        lines.append(f"- Note: {report['note']}")
    figures = {(r.get("memory") or {}).get("figure") for r in valid} - {None}
    if figures:
        what = {"device_used": "GPU memory in use after the answer (cudaMemGetInfo total minus free; includes the "
                               "prefill scratch the engine keeps from load)",
                "rss": "process resident memory after the answer"}
        lines.append("- Memory GB: " + "; ".join(what[f] for f in sorted(figures)) + ".")
    lines += ["", "## Medians of valid samples", "", medians_table(report), "",
              "Rates exclude loading and store building. Completion s is prefill plus decode time of the whole "
              "answer. Answers differ in length, so compare answer tokens and completion time alongside the rates. "
              "Capped, cycling and failed samples are saved but left out of the medians."]
    if any(r["status"] == "capped" for r in report["samples"]):
        lines += ["", "### Rates including capped answers", "",
                  "The same medians over finished and capped samples: a capped answer's rates are measured "
                  "like any other, but its length and completion time say only where the cap fell.", "",
                  medians_table(report, statuses=("ok", "capped")).replace("| Valid |", "| Counted |")]
    if any(c.get("cut_weak") for c in report["suite"]["configs"] if c["name"] in selection["configs"]):
        lines.append("Settings with a deadline cut (`--cut-weak`) make output timing-dependent: they are not "
                     "reproducible.")
    pel = pelican_lines(report)
    if pel:
        lines += [""] + pel
    excluded = [r for r in report["samples"] if r["status"] != "ok"]
    if excluded:
        lines += ["", "## Excluded from the medians", ""]
        lines += [f"- `{r['id']}`: {_reason(r)} ({r['answer_file']})" for r in excluded]
    for key, title in (("setup_runs", "Setup runs (the load built an expert table; excluded)"),
                       ("previous_attempts", "Earlier attempts (retried on resume)")):
        if report.get(key):
            lines += ["", f"## {title}", ""]
            lines += [f"- `{r['id']}`: {r['status']}" + (f", load {r['load_s']:.2f} s" if r.get("load_s") else "")
                      + (f": {_reason(r)}" if r["status"] not in ("ok",) else "") for r in report[key]]
    lines += ["", "Files: report.json (provenance, settings, every figure), gallery.html (answers and pelicans side "
                  "by side), answers/, pelicans/, logs/. Method: docs/benchmarks.md."]
    return "\n".join(lines) + "\n"


def write_summary(directory, report):
    write_atomic(Path(directory) / "summary.md", render_summary(report))
