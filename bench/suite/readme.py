"""`readme DIR`: the run's own README.md (what a published run shows first: the machine, the
setup, exclusions, the pelicans and links to everything else), and with --update FILE the
benchmark section of another README (by default none), between marker comments, refreshed from
the run without inference. `summarize` never touches the run's README."""
import os
from pathlib import Path

from . import report_file
from .errors import SuiteError
from .files import write_atomic
from .machine import describe
from .summary import medians_table

BEGIN = "<!-- bench-suite:begin -->"
END = "<!-- bench-suite:end -->"


def _pelican_table(report, base):
    configs = {c["name"]: c["label"] for c in report["suite"]["configs"]}
    pelicans = [r for r in report["samples"] if r.get("kind") == "pelican"]
    if not pelicans:
        return []
    head = "| " + " | ".join(configs.get(r["config"], r["config"]) for r in pelicans) + " |"
    cells = []
    for r in pelicans:
        if (r.get("svg") or {}).get("status") == "valid":
            cells.append(f'<img src="{base}{r["svg_file"]}" width="220" alt="pelican, {configs.get(r["config"], r["config"])}">')
        else:
            cells.append(f"invalid SVG ({(r.get('svg') or {}).get('status', 'missing')}): [answer]({base}{r['answer_file']})")
    return ["These are unedited model outputs from the benchmark.", "", head,
            "|" + "---|" * len(pelicans), "| " + " | ".join(cells) + " |"]


def render_run_readme(report):
    prov = report["provenance"]
    valid = [r for r in report["samples"] if r["status"] == "ok"]
    source = prov.get("source") or {}
    lines = ["# Cherenkov benchmark", ""]
    if source.get("commit"):
        lines += [f"Source commit: {source['commit']}" + (" (with local changes)" if source.get("source_dirty") else ""), ""]
    lines += [f"Hardware: {describe(prov['hardware_detail'])}.", "",
              f"The report contains {len(valid)} valid samples of {len(report['samples'])} run "
              f"({len(report.get('plan', []))} planned).", "", "## Setup", "",
              f"Every sample ran in a fresh process with a context of {report['settings']['context']} tokens, "
              f"{report['settings']['drafts']} adaptive drafts and an adaptive expert pool; no CPU checks, prefix cache or "
              "developer overrides. Rates exclude loading and store building."]
    if report.get("note"):
        lines += ["", f"Note: {report['note']}"]
    excluded = [r for r in report["samples"] if r["status"] != "ok"] + report.get("setup_runs", [])
    if excluded:
        lines += ["", "## Exclusions", ""] + [f"- `{r['id']}`: {r['status']}" for r in excluded]
    pel = _pelican_table(report, "")
    if pel:
        lines += ["", "## Pelicans", ""] + pel
    lines += ["", "## Timings", "", medians_table(report), "",
              "[Summary](summary.md) · [Gallery](gallery.html) · [Raw data and hashes](report.json) · "
              "answers in [answers/](answers/)"]
    return "\n".join(lines) + "\n"


def render_section(report, run_link):
    prov = report["provenance"]
    valid = [r for r in report["samples"] if r["status"] == "ok"]
    lines = [BEGIN, "", f"Hardware: {describe(prov['hardware_detail'])}.", "",
             f"The report contains {len(valid)} valid samples. The inference rates exclude loading and store "
             "construction. Answer lengths vary, so compare completion times in the "
             f"[full report]({run_link}/summary.md).", "", medians_table(report), ""]
    pel = _pelican_table(report, run_link + "/")
    if pel:
        lines += pel + [""]
    lines += [f"[All timings and outputs]({run_link}/README.md).", "", END]
    return "\n".join(lines)


def write_readme(directory, update=None):
    directory = Path(directory)
    report = report_file.load(directory)
    write_atomic(directory / "README.md", render_run_readme(report))
    if update is None:
        return
    update = Path(update)
    try:
        text = update.read_text(encoding="utf-8")
    except OSError as e:
        raise SuiteError(f"{update}: cannot read: {e}") from None
    link = os.path.relpath(directory.resolve(), update.resolve().parent)
    section = render_section(report, link)
    if BEGIN in text and END in text and text.index(BEGIN) < text.index(END):
        text = text[:text.index(BEGIN)] + section + text[text.index(END) + len(END):]
    elif BEGIN in text or END in text:
        raise SuiteError(f"{update}: the {BEGIN} / {END} markers are unbalanced")
    else:
        text = text.rstrip("\n") + "\n\n## Benchmark run\n\n" + section + "\n"
    write_atomic(update, text)
