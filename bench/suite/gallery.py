"""gallery.html: a local preview of a run, answers side by side per workload (one column per
setting, one row per round) and the pelicans next to each other. Valid SVGs are shown through
<img>, so nothing in a model's SVG runs; invalid ones are marked and shown as text. No scripts."""
import html
from pathlib import Path

from .files import write_atomic
from .machine import describe

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #1d1d1f; background: #fafafa; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 32px; }
.facts { color: #555; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 16px; }
.card { background: #fff; border: 1px solid #ddd; border-radius: 8px; padding: 12px; }
.card img { width: 100%; height: 240px; object-fit: contain; background: #fff; }
.invalid { border-color: #c0392b; }
.badge { display: inline-block; padding: 1px 6px; border-radius: 4px; font-size: 12px; background: #e8e8e8; }
.badge.ok, .badge.valid { background: #d5f5e3; } .badge.capped { background: #fdebd0; }
.badge.cycle, .badge.invalid, .badge.engine-error, .badge.timeout, .badge.memory-invalid,
.badge.power-change { background: #f5b7b1; }
table.answers { border-collapse: collapse; width: 100%; table-layout: fixed; }
table.answers th, table.answers td { border: 1px solid #ddd; padding: 8px; vertical-align: top; background: #fff; }
pre { white-space: pre-wrap; word-break: break-word; max-height: 420px; overflow: auto; margin: 6px 0 0;
      font: 12px/1.4 ui-monospace, monospace; background: #f4f4f4; padding: 6px; }
.figures { color: #555; font-size: 12px; }
"""


def _esc(text):
    return html.escape(str(text), quote=True)


def _read(directory, name, limit=200_000):
    if not name:
        return ""
    try:
        text = (Path(directory) / name).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(file missing)"
    return text if len(text) <= limit else text[:limit] + "\n… (cut; the whole answer is in " + name + ")"


def _figures(r):
    parts = []
    if r.get("prefill") and r["prefill"].get("tok_s") is not None:
        parts.append(f"prefill {r['prefill']['tok_s']:.1f} tok/s")
    if r.get("decode") and r["decode"].get("tok_s") is not None:
        parts.append(f"decode {r['decode']['tok_s']:.1f} tok/s")
    if r.get("answer_tokens") is not None:
        parts.append(f"{r['answer_tokens']} tokens")
    if r.get("completion_s") is not None:
        parts.append(f"{r['completion_s']:.2f} s")
    return ", ".join(parts)


def _pelican_card(directory, r, label):
    svg = r.get("svg") or {}
    status = svg.get("status", "missing")
    head = (f'<div><strong>{_esc(label)}</strong> <code>{_esc(r["id"])}</code> '
            f'<span class="badge {_esc(status if status == "valid" else "invalid")}">'
            f'{"valid SVG" if status == "valid" else "invalid SVG: " + _esc(status)}</span></div>')
    if status == "valid":
        body = f'<img src="{_esc(r["svg_file"])}" alt="{_esc(label)} pelican">'
    else:
        detail = f'<div class="figures">{_esc(svg.get("detail", ""))}</div>'
        body = detail + f"<pre>{_esc(_read(directory, r.get('svg_file') or r.get('answer_file'), 4000))}</pre>"
    cls = "card" if status == "valid" else "card invalid"
    return f'<div class="{cls}">{head}{body}<div class="figures">{_esc(_figures(r))}</div></div>'


def render_gallery(directory, report):
    configs = {c["name"]: c["label"] for c in report["suite"]["configs"]}
    cases = {c["name"]: c for c in report["suite"]["cases"]}
    selection = report["selection"]
    samples = report["samples"]
    valid = sum(1 for r in samples if r["status"] == "ok")
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<title>Cherenkov benchmark gallery</title>", f"<style>{STYLE}</style></head><body>",
           "<h1>Cherenkov benchmark</h1>",
           f'<p class="facts">{_esc(describe(report["provenance"]["hardware_detail"]))}</p>',
           f'<p>{valid} valid of {len(samples)} samples run ({len(report.get("plan", []))} planned). '
           'Unedited model outputs. <a href="summary.md">summary.md</a> · <a href="report.json">report.json</a></p>']
    if report.get("note"):
        out.append(f"<p>Note: {_esc(report['note'])}</p>")
    pelicans = [r for r in samples if r.get("kind") == "pelican"]
    if pelicans:
        out += ["<h2>Pelicans</h2>", '<div class="grid">']
        out += [_pelican_card(directory, r, configs.get(r["config"], r["config"])) for r in pelicans]
        out.append("</div>")
    for case_name in selection["cases"]:
        case = cases.get(case_name, {})
        if case.get("kind") == "pelican":
            continue
        group = [r for r in samples if r["case"] == case_name]
        if not group:
            continue
        out.append(f"<h2>{_esc(case.get('title', case_name))}</h2>")
        out.append('<table class="answers"><tr><th style="width:70px">Round</th>'
                   + "".join(f"<th>{_esc(configs.get(c, c))}</th>" for c in selection["configs"]) + "</tr>")
        for round_number in sorted({r["round"] for r in group}):
            row = [f"<td>{round_number}</td>"]
            for config in selection["configs"]:
                r = next((x for x in group if x["round"] == round_number and x["config"] == config), None)
                if r is None:
                    row.append("<td>not run</td>")
                    continue
                row.append(f'<td><span class="badge {_esc(r["status"])}">{_esc(r["status"])}</span> '
                           f'<code>{_esc(r["id"])}</code><div class="figures">{_esc(_figures(r))}</div>'
                           f'<pre>{_esc(_read(directory, r.get("answer_file")))}</pre></td>')
            out.append("<tr>" + "".join(row) + "</tr>")
        out.append("</table>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def write_gallery(directory, report):
    write_atomic(Path(directory) / "gallery.html", render_gallery(directory, report))
