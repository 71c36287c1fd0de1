"""`scripts/bench-suite MODEL ...`: plans the samples, checks everything that needs no
inference first (binary, model identity, stores, prompts against the context), then runs each
sample as a fresh process, writing report.json, summary.md, the gallery and the answer after
every one, and resumes an interrupted or failed run."""
import datetime
import os
import subprocess
import sys
from pathlib import Path

from . import machine, report_file
from .archive import archive_directory
from .engine_cli import Engine, binary_sha256, model_identity, present_tables, store_work
from .errors import SuiteError, UsageError
from .files import sha256_text, write_atomic
from .gallery import write_gallery
from .plan import plan, select
from .readme import write_readme
from .sample_process import run_watched
from .sample_record import classify
from .scrub import Scrubber
from .source_info import source_info
from .suite_file import load_suite
from .summary import write_summary
from .svg_check import check_svg

REPO = Path(__file__).resolve().parents[2]


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def default_output():
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return REPO / "results" / stamp


def resolve_binary(given, dry_run):
    """--binary as given, or the repository's build/cherenkov, built first (offline) unless this
    is a dry run."""
    if given:
        path = Path(given)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise UsageError(f"--binary {given}: not an executable file")
        return path
    build = REPO / "build"
    binary = build / "cherenkov"
    if dry_run:
        if not binary.is_file():
            raise SuiteError(f"no binary at {binary}: build it (scripts/setup) or pass --binary")
        return binary
    print(f"bench-suite: building {binary}", file=sys.stderr)
    if not (build / "build.ninja").is_file():
        subprocess.run(["cmake", "-S", str(REPO), "-B", str(build), "-G", "Ninja"], check=False)
    done = subprocess.run(["cmake", "--build", str(build), "--target", "cherenkov"], check=False)
    if done.returncode != 0 or not binary.is_file():
        raise SuiteError(f"building {binary} failed; pass --binary to use another")
    return binary


def parse_case_caps(items, suite):
    caps = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not value.isdigit() or int(value) < 1:
            raise UsageError(f"--case-cap {item}: expected NAME=N with N a positive integer")
        if name not in {c.name for c in suite.cases}:
            raise UsageError(f"--case-cap {item}: the suite has no case {name!r}")
        caps[name] = int(value)
    return caps


class SuiteRun:
    def __init__(self, opts):
        self.opts = opts
        suite_path = Path(opts.suite) if opts.suite else REPO / "bench" / "suite.json"
        self.suite = load_suite(suite_path)
        self.cap_overrides = parse_case_caps(opts.case_cap, self.suite)
        if opts.rounds is not None and opts.rounds < 1:
            raise UsageError("--rounds: must be at least 1")
        if opts.resume and not opts.output:
            raise UsageError("--resume needs --output DIR, the run to continue")
        self.binary = resolve_binary(opts.binary, opts.dry_run)
        self.engine = Engine(self.binary, opts.model, opts.root)
        # The model is inspected here, before any sample: never inside timed work.
        self.inspected = self.engine.inspect()
        self.store_dir = self.inspected.get("path")
        self.identity = model_identity(self.engine, self.inspected)
        self.tables = present_tables(self.store_dir)
        self.selection = select(self.suite, opts.mode, opts.cases, opts.configs, opts.rounds, self.tables)
        self.samples = plan(self.suite, self.selection)
        self.caps = {name: self.cap_overrides.get(name, self.suite.case(name).cap) for name in self.selection.cases}
        self.binary_sha256 = binary_sha256(self.binary)
        self.missing_tables = sorted({b for n in self.selection.configs for b in self.suite.config(n).expert_tables()}
                                     - self.tables, reverse=True)
        self.scrub = Scrubber()
        self.scrub.add(self.binary, "<binary>")
        if os.path.exists(opts.model):
            self.scrub.add(opts.model, "<model>")
        self.scrub.add(opts.root, "<root>")
        self.scrub.add(self.suite.path, "<suite>")
        self.scrub.add(self.store_dir, "<store>")
        self.scrub.add(self.engine.paths().get("data"), "<data>")
        self.scrub.add_defaults()
        self.prompts = self._prompts()
        self.output = Path(opts.output) if opts.output else default_output()
        self.scrub.add(self.output, "<output>")

    # Prompts: rendered and counted once, outside timed work.
    def _prompts(self):
        prompts = {}
        for name in self.selection.cases:
            case = self.suite.case(name)
            tokens = len(self.engine.prompt_tokens(case))
            entry = {"tokens": tokens}
            if case.messages is not None:
                entry["rendered"] = self.engine.render_chat(case)
            text = entry.get("rendered", case.prompt)
            entry["sha256"] = sha256_text(text)
            # The CLI refuses before loading what cannot fit (cmd_run.cpp): say so now instead.
            need = tokens + self.caps[name] + self.suite.drafts
            if need > self.suite.context:
                raise SuiteError(f"case {name}: prompt {tokens} tokens + cap {self.caps[name]} + {self.suite.drafts} "
                                 f"draft tokens = {need} exceeds the context of {self.suite.context}")
            prompts[name] = entry
        return prompts

    def signature(self):
        return {"binary_sha256": self.binary_sha256, "model": self.identity, "suite_sha256": self.suite.sha256,
                "selection": self.selection.as_dict(),
                "settings": {"context": self.suite.context, "drafts": self.suite.drafts, "args": self.suite.args},
                "caps": self.caps}

    def command(self, sample):
        """The sample's real command line and the one the report records (placeholders)."""
        case, config = self.suite.case(sample.case), self.suite.config(sample.config)
        text = self.prompts[case.name].get("rendered", case.prompt)
        raw = case.raw or case.messages is not None
        tail = ["--max-tokens", str(self.caps[case.name]), "--max-ctx", str(self.suite.context),
                "--drafts", str(self.suite.drafts)]
        tail += ["--raw"] if raw else []
        tail += config.engine_args() + list(self.suite.args)
        if not self.opts.build_stores:
            tail.append("--no-build-missing-store")
        root = ["--root", str(self.opts.root)] if self.opts.root else []
        real = [str(self.binary), self.opts.model, text, *tail, *root]
        shown = ["<binary>", "<model>", f"<prompt:{case.name}>", *tail, *(["--root", "<root>"] if root else [])]
        return real, shown

    def describe_plan(self):
        out = [f"bench-suite: {len(self.samples)} samples ({self.selection.mode or 'full'} selection: "
               f"cases {', '.join(self.selection.cases)}; settings {', '.join(self.selection.configs)}; "
               f"{self.selection.rounds} round(s))",
               f"binary: {self.binary} (sha256 {self.binary_sha256[:16]})",
               f"model: {self.opts.model} (ID {self.identity['model_id'] or 'not indexed'}, manifest sha256 "
               f"{self.identity['manifest_sha256'][:16]}), store tables Q" + "/Q".join(map(str, sorted(self.tables, reverse=True)))]
        for name, why in self.selection.skipped_configs.items():
            out.append(f"skipped setting {name}: {why}")
        if self.missing_tables:
            out.append("missing expert tables: Q" + "/Q".join(map(str, self.missing_tables))
                       + (" (built at the first sample that needs them: --build-stores)" if self.opts.build_stores else ""))
        for name, entry in self.prompts.items():
            out.append(f"prompt {name}: {entry['tokens']} tokens, cap {self.caps[name]}, context {self.suite.context}")
        for index, sample in enumerate(self.samples, 1):
            out.append(f"{index:3d}. {sample.id}: " + " ".join(self.command(sample)[1]))
        return "\n".join(out)

    def check_tables(self):
        if self.missing_tables and not self.opts.build_stores:
            bits = ",".join(map(str, sorted(self.tables | set(self.missing_tables), reverse=True)))
            raise SuiteError("the store has no Q" + "/Q".join(map(str, self.missing_tables)) + " expert table for "
                             "the selected settings: pass --build-stores to build them at load, or run "
                             f"cherenkov prepare {self.opts.model} --experts {bits}")

    # The report.
    def new_report(self):
        detail = machine.hardware_detail(self.store_dir)
        return {"format": report_file.FORMAT, "kind": "suite", "version": 1, "created": utc_now(), "updated": None,
                "complete": False, "note": self.opts.note,
                "signature": dict(self.signature(), hardware=machine.stable_facts(detail)),
                "signatures": [],
                "provenance": {
                    "hardware_detail": detail,
                    "binary": {"path": "<binary>", "sha256": self.binary_sha256},
                    "model": {"argument": "<model>", "identity": self.identity,
                              "store_tables": sorted(self.tables, reverse=True)},
                    "root": "<root>" if self.opts.root else None,
                    "suite": {"path": "<suite>", "sha256": self.suite.sha256},
                    "source": source_info(REPO),
                    "runner": {"python": sys.version.split()[0]}},
                "settings": {"context": self.suite.context, "drafts": self.suite.drafts, "pool": "adaptive unless a "
                             "setting passes --pool-gb", "caps": self.caps, "cap_overrides": self.cap_overrides,
                             "build_stores": bool(self.opts.build_stores), "mode": self.selection.mode,
                             "cycle_check_seconds": self.suite.cycle_check_seconds,
                             "power_check_seconds": self.suite.power_check_seconds},
                "selection": self.selection.as_dict(),
                "skipped_configs": self.selection.skipped_configs,
                "suite": self.suite.resolved,
                "prompts": self.prompts,
                "plan": [s.id for s in self.samples],
                "samples": [], "setup_runs": [], "previous_attempts": [], "resumes": []}

    def open_report(self):
        report_path = self.output / "report.json"
        if self.opts.resume:
            report = report_file.load(self.output)
            signature = dict(self.signature(), hardware=machine.stable_facts(machine.hardware_detail(self.store_dir)))
            raised = report_file.check_resume(report, signature)
            if raised:
                report["signatures"].append(report["signature"])
                report["signature"] = signature
                report["settings"]["caps"] = self.caps
                report["settings"]["cap_overrides"] = self.cap_overrides
            detail = machine.hardware_detail(self.store_dir)
            detail["expert_read"] = machine.read_sample(self.store_dir)
            report["resumes"].append({"started": utc_now(), "note": self.opts.note, "hardware_detail": self.scrub.json(detail),
                                      "raised_caps": raised})
            for record in list(report["samples"]):
                retry = record["status"] not in report_file.KEPT or (record["status"] == "capped" and record["case"] in raised)
                if retry:
                    self.retire(report, record, "previous_attempts")
            return report
        if report_path.exists():
            raise SuiteError(f"{report_path} exists: pass --resume to continue that run, or another --output")
        report = self.new_report()
        report["provenance"]["hardware_detail"]["expert_read"] = machine.read_sample(self.store_dir)
        report["provenance"] = self.scrub.json(report["provenance"])
        return report

    def retire(self, report, record, bucket):
        """Moves a sample's record (and renames its files) to previous_attempts or setup_runs."""
        report["samples"] = [r for r in report["samples"] if r is not record]
        n = sum(1 for r in report["previous_attempts"] + report["setup_runs"] if r["id"] == record["id"]) + 1
        tag = "setup" if bucket == "setup_runs" else "attempt"
        for key in ("answer_file", "stderr_file", "svg_file"):
            name = record.get(key)
            if not name:
                continue
            old = self.output / name
            stem, dot, ext = name.rpartition(".")
            new_name = f"{stem}.{tag}{n}.{ext}" if dot else f"{name}.{tag}{n}"
            if old.exists():
                os.replace(old, self.output / new_name)
            record[key] = new_name
        report[bucket].append(record)

    def refresh_store(self):
        """After a load changed the store (a new table, perhaps a new store directory)."""
        self.inspected = self.engine.inspect()
        self.store_dir = self.inspected.get("path")
        self.tables = present_tables(self.store_dir)
        self.scrub.add(self.store_dir, "<store>")
        self.report["provenance"]["model"]["store_tables"] = sorted(self.tables, reverse=True)

    def publish(self, report):
        report["updated"] = utc_now()
        done = {r["id"] for r in report["samples"] if r["status"] in report_file.KEPT}
        report["complete"] = all(s.id in done for s in self.samples)
        report_file.save(self.output, report)
        write_summary(self.output, report)
        write_gallery(self.output, report)

    def run_sample(self, sample):
        case = self.suite.case(sample.case)
        real, shown = self.command(sample)
        started = utc_now()
        process = run_watched(real, self.suite.cycle_check_seconds, self.suite.power_check_seconds,
                              self.suite.sample_timeout_seconds)
        answer = process.stdout.decode("utf-8", "replace")
        if answer.endswith("\n"):
            answer = answer[:-1]  # the newline the CLI adds after the answer
        memory = self.report["provenance"]["hardware_detail"].get("memory_bytes")
        record = {"id": sample.id, "round": sample.round, "case": sample.case, "config": sample.config,
                  "kind": case.kind, "cap": self.caps[case.name], "started": started, "command": shown}
        record.update(classify(process, answer, memory))
        record["store_work"] = store_work(process.stderr)
        record = self.scrub.json(record)
        (self.output / "answers").mkdir(parents=True, exist_ok=True)
        (self.output / "logs").mkdir(parents=True, exist_ok=True)
        record["answer_file"] = f"answers/{sample.id}.txt"
        write_atomic(self.output / record["answer_file"], answer)
        record["stderr_file"] = f"logs/{sample.id}.stderr.txt"
        write_atomic(self.output / record["stderr_file"], self.scrub.text(process.stderr))
        if case.kind == "pelican":
            svg = check_svg(answer)
            record["svg"] = {"status": svg["status"], "detail": svg["detail"]}
            if svg["svg"] is not None:
                (self.output / "pelicans").mkdir(exist_ok=True)
                name = f"pelicans/{sample.id}.svg" if svg["status"] == "valid" else f"pelicans/{sample.id}.invalid.txt"
                write_atomic(self.output / name, svg["svg"])
                record["svg_file"] = name
        return record

    def run(self):
        self.check_tables()
        self.output.mkdir(parents=True, exist_ok=True)
        self.report = self.open_report()
        self.publish(self.report)
        done = {r["id"] for r in self.report["samples"]}
        pending = [s for s in self.samples if s.id not in done]
        print(f"bench-suite: {len(pending)} of {len(self.samples)} samples to run into {self.output}", file=sys.stderr)
        for index, sample in enumerate(pending, 1):
            record = self.run_sample(sample)
            if record["store_work"] and record["status"] not in report_file.STOPPING:
                # The load built an expert table (or published a store): not a measurement of
                # inference. Kept under setup_runs, and the sample runs again on the new store.
                self.report["samples"].append(record)
                self.retire(self.report, record, "setup_runs")
                self.publish(self.report)
                self.refresh_store()
                record = self.run_sample(sample)
            self.report["samples"].append(record)
            self.publish(self.report)
            print(f"bench-suite: [{index}/{len(pending)}] {sample.id}: {record['status']}"
                  + (f", decode {record['decode']['tok_s']:.2f} tok/s" if (record.get("decode") or {}).get("tok_s") else ""),
                  file=sys.stderr)
            if record["status"] in report_file.STOPPING:
                raise SuiteError(f"{sample.id}: {record['status']}: {record.get('error', '')}\n"
                                 f"the run stopped; fix the cause and continue with: scripts/bench-suite "
                                 f"{self.opts.model} --output {self.output} --resume (same selections)")
        print(f"bench-suite: done: {self.output / 'summary.md'}", file=sys.stderr)
        if self.opts.archive or self.selection.mode in ("light", "heavy"):
            print(f"bench-suite: archive {archive_directory(self.output)}", file=sys.stderr)
        if self.opts.update_readme:
            write_readme(self.output, update=REPO / "README.md")
        return 0


def run_suite(opts):
    run = SuiteRun(opts)
    if opts.dry_run:
        print(run.describe_plan())
        run.check_tables()
        return 0
    return run.run()
