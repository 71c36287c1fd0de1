"""report.json: reading it back, writing it after every sample, and the resume rules (seed
"Reports and resume"): a resumed run must have the same binary, model identity, machine facts,
suite, selection and settings; answer caps may only rise. Successful and content-invalid
samples are kept; failed ones are retried, their earlier attempts kept."""
import json
from pathlib import Path

from .errors import SuiteError
from .files import write_json_atomic

FORMAT = "cherenkov-bench-report"
# Kept on resume: a finished answer (EOS), one that hit its cap (retried only when the cap
# rises), and one stopped by the loop check (content-invalid).
KEPT = {"ok", "capped", "cycle"}
# Stop the suite; retried on resume.
STOPPING = {"engine-error", "timeout", "memory-invalid", "power-change"}


def load(directory, kind="suite"):
    path = Path(directory) / "report.json"
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"{path}: no report to resume or summarize") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SuiteError(f"{path}: unreadable report: {e}") from None
    if not isinstance(report, dict) or report.get("format") != FORMAT:
        raise SuiteError(f"{path}: format: not a {FORMAT} file")
    if report.get("kind") != kind:
        raise SuiteError(f"{path}: kind: a {report.get('kind')!r} report, not {kind!r}")
    for key in ("signature", "samples"):
        if key not in report:
            raise SuiteError(f"{path}: {key}: missing")
    return report


def save(directory, report):
    write_json_atomic(Path(directory) / "report.json", report)


def _differences(old, new, prefix=""):
    if isinstance(old, dict) and isinstance(new, dict):
        found = []
        for key in sorted(set(old) | set(new)):
            found += _differences(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else key)
        return found
    return [] if old == new else [prefix]


def check_resume(report, signature):
    """Raises unless `signature` may continue `report`; returns the cases whose caps rose."""
    old = report["signature"]
    if not old.get("model", {}).get("model_id") and not old.get("model", {}).get("manifest_sha256"):
        raise SuiteError("the report records no model identity; start a new run")
    old_caps, new_caps = old.get("caps", {}), signature.get("caps", {})
    lowered = sorted(c for c in old_caps if c in new_caps and new_caps[c] < old_caps[c])
    if lowered:
        raise SuiteError("--resume refused: lower answer caps than the report's for " + ", ".join(
            f"{c} ({new_caps[c]} < {old_caps[c]})" for c in lowered))
    rest_old = {k: v for k, v in old.items() if k != "caps"}
    rest_new = {k: v for k, v in signature.items() if k != "caps"}
    differing = _differences(rest_old, rest_new)
    if set(old_caps) != set(new_caps):
        differing.append("caps (cases)")
    if differing:
        raise SuiteError("--resume refused: the run differs from the report in " + ", ".join(differing)
                         + " (same binary, model, machine, suite and selections are needed; start a new run)")
    return sorted(c for c in new_caps if new_caps[c] > old_caps.get(c, 0))
