"""Command line of scripts/bench-suite. Usage errors exit 2, other failures 1 (seed rules)."""
import argparse
import json
import sys
from pathlib import Path

from . import report_file
from .errors import SuiteError, UsageError

USAGE = """scripts/bench-suite MODEL [--binary PATH] [--root DIR] [--suite FILE] [--dry-run] [--build-stores]
                          [--cases a,b] [--configs a,b] [--rounds N] [--output DIR] [--resume]
                          [--mode light|heavy] [--note TEXT] [--archive] [--case-cap NAME=N ...]
                          [--update-readme]
       scripts/bench-suite summarize DIR
       scripts/bench-suite readme DIR [--update FILE]
       scripts/bench-suite prefill --before BIN --after BIN --model M --out DIR [--rounds N]
                          [--configs 4/2|4/3] [--root DIR] [--lengths 121,521,3221] [--context N]"""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def _suite_parser():
    p = _Parser(prog="bench-suite", usage=USAGE, description="Run the benchmark suite (docs/benchmarks.md).")
    p.add_argument("model", help="any reference the model index accepts, or a prepared store directory")
    p.add_argument("--binary", help="the cherenkov binary (default: build/cherenkov, built first)")
    p.add_argument("--root", help="data root of the model index")
    p.add_argument("--suite", help="suite file (default bench/suite.json)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and check it; run nothing")
    p.add_argument("--build-stores", action="store_true", help="let a sample's load build a missing low-bit table")
    p.add_argument("--cases", help="workloads to run, comma-separated")
    p.add_argument("--configs", help="settings to run, comma-separated")
    p.add_argument("--rounds", type=int, help="rounds (default: the suite's, 1 in light mode)")
    p.add_argument("--output", help="results directory (default results/<UTC timestamp>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --output")
    p.add_argument("--mode", choices=["light", "heavy"], help="light: one round of code, prose and long-prefill on "
                   "the stores already built; heavy: everything; both archive the results")
    p.add_argument("--note", help="conditions worth recording (power, other load)")
    p.add_argument("--archive", action="store_true", help="zip the results directory beside itself")
    p.add_argument("--case-cap", action="append", metavar="NAME=N", help="answer cap for a workload (repeatable)")
    p.add_argument("--update-readme", action="store_true", help="after a complete run, write its README.md and "
                   "refresh the repository README's benchmark section")
    return p


def _prefill_parser():
    p = _Parser(prog="bench-suite prefill", usage=USAGE)
    p.add_argument("--before", required=True)
    p.add_argument("--after", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--configs")
    p.add_argument("--root")
    p.add_argument("--suite", help="suite whose long-prefill case gives the prompt text")
    p.add_argument("--lengths", default="121,521,3221", help="prompt lengths in tokens")
    p.add_argument("--context", type=int, default=8192)
    return p


def _dir_parser(name, update=False):
    p = _Parser(prog=f"bench-suite {name}", usage=USAGE)
    p.add_argument("dir")
    if update:
        p.add_argument("--update", help="also refresh the benchmark section of this README")
    return p


def summarize(directory):
    from .gallery import write_gallery
    from .prefill import MIXED, UNIFORM, render_prefill_summary
    from .files import write_atomic
    from .summary import write_summary
    path = Path(directory) / "report.json"
    try:
        kind = json.loads(path.read_text(encoding="utf-8")).get("kind")
    except (OSError, ValueError):
        kind = "suite"  # load() below says what is wrong
    report = report_file.load(directory, kind="prefill" if kind == "prefill" else "suite")
    if kind == "prefill":
        configs = UNIFORM + [c for group in MIXED.values() for c in group]
        write_atomic(Path(directory) / "summary.md", render_prefill_summary(report, configs))
    else:
        write_summary(directory, report)
        write_gallery(directory, report)
    print(f"bench-suite: rewrote {Path(directory) / 'summary.md'}")
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "summarize":
            return summarize(_dir_parser("summarize").parse_args(argv[1:]).dir)
        if argv and argv[0] == "readme":
            from .readme import write_readme
            opts = _dir_parser("readme", update=True).parse_args(argv[1:])
            write_readme(opts.dir, update=opts.update)
            print(f"bench-suite: wrote {Path(opts.dir) / 'README.md'}")
            return 0
        if argv and argv[0] == "prefill":
            from .prefill import run_prefill
            return run_prefill(_prefill_parser().parse_args(argv[1:]))
        from .runner import run_suite
        return run_suite(_suite_parser().parse_args(argv))
    except UsageError as e:
        print(f"bench-suite: {e}\n{USAGE}", file=sys.stderr)
        return 2
    except SuiteError as e:
        print(f"bench-suite: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("bench-suite: interrupted; continue with --resume", file=sys.stderr)
        return 1
