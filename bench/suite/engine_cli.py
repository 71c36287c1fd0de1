"""Everything the runner asks the cherenkov binary outside timed work (the model's identity in
the index, its store, prompt rendering and token counts), and the parser of what one generation
prints on stderr (`load:`, `prefill:`, `decode:`, `mtp:`, `memory_stats {json}`)."""
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from .errors import SuiteError
from .files import sha256_file

# What `cherenkov MODEL 'prompt'` prints on stderr (src/cli/cmd_run.cpp print_timings).
LOAD_RE = re.compile(r"^load: ([0-9.]+) s$", re.M)
PREFILL_RE = re.compile(r"^prefill: (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tok/s\), (\d+) chunk\(s\) of up to (\d+)$", re.M)
DECODE_RE = re.compile(r"^decode: (\d+) tokens in ([0-9.]+) s \(([0-9.]+) tok/s\), (\d+) steps, stop: (\S+)$", re.M)
MTP_RE = re.compile(r"^mtp: draft 1 accepted (\d+)/(\d+), draft 2 accepted (\d+)/(\d+)$", re.M)
MEMORY_RE = re.compile(r"^memory_stats (\{.*\})$", re.M)
BACKEND_RE = re.compile(r"^backend: (\S+)$", re.M)
POOL_RE = re.compile(r"^expert pool: (.*)$", re.M)
TABLE_FILES = {4: ("experts.bin",), 3: ("experts3.bin", "manifest3.json"), 2: ("experts2.bin", "manifest2.json")}


class Engine:
    """The binary under test, with the model reference and --root as the user gave them."""

    def __init__(self, binary, model, root=None, timeout=600):
        self.binary, self.model, self.root, self.timeout = str(binary), str(model), root, timeout
        # The text commands (prompt, tokenize, detokenize) take no --root, so once the model's
        # store is known they are pointed at it directly.
        self.text_dir = None

    def text_model(self):
        return self.text_dir or self.model

    def root_args(self):
        return ["--root", str(self.root)] if self.root else []

    def call(self, *args, what):
        command = [self.binary, *map(str, args)]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=self.timeout)
        except OSError as e:
            raise SuiteError(f"cannot run the binary {self.binary}: {e}") from None
        except subprocess.TimeoutExpired:
            raise SuiteError(f"{what} took over {self.timeout} s") from None
        if result.returncode != 0:
            raise SuiteError(f"{what} failed (exit {result.returncode}): {result.stderr.strip()}")
        return result.stdout

    def call_json(self, *args, what):
        out = self.call(*args, what=what)
        try:
            return json.loads(out)
        except json.JSONDecodeError as e:
            raise SuiteError(f"{what} printed no JSON ({e})") from None

    def inspect(self):
        inspected = self.call_json("inspect", self.model, "--json", *self.root_args(),
                                   what=f"cherenkov inspect {self.model}")
        if isinstance(inspected, dict) and inspected.get("path"):
            self.text_dir = inspected["path"]
        return inspected

    def model_list(self):
        return self.call_json("model", "list", "--json", *self.root_args(), what="cherenkov model list")

    def paths(self):
        return self.call_json("paths", "--json", *self.root_args(), what="cherenkov paths")

    def prompt_tokens(self, case):
        """Token ids of the case's prompt as the sample will run it (chat-rendered unless raw)."""
        with tempfile.TemporaryDirectory(prefix="cherenkov-bench-") as tmp:
            if case.raw:
                batch = Path(tmp) / "prompt.jsonl"
                batch.write_text(json.dumps(case.prompt) + "\n", encoding="utf-8")
                out = self.call("tokenize", self.text_model(), "--batch-jsonl", batch,
                                what=f"tokenizing the {case.name} prompt")
                return json.loads(out.splitlines()[0])
            args = self._chat_files(tmp, case)
            return json.loads(self.call("prompt", self.text_model(), *args, "--tokens",
                                        what=f"rendering the {case.name} conversation"))

    def render_chat(self, case):
        """The conversation of a `messages` case through the model's chat template, as text."""
        with tempfile.TemporaryDirectory(prefix="cherenkov-bench-") as tmp:
            args = self._chat_files(tmp, case)
            return self.call("prompt", self.text_model(), *args, what=f"rendering the {case.name} conversation")

    def tokenize_text(self, text):
        with tempfile.TemporaryDirectory(prefix="cherenkov-bench-") as tmp:
            batch = Path(tmp) / "text.jsonl"
            batch.write_text(json.dumps(text) + "\n", encoding="utf-8")
            out = self.call("tokenize", self.text_model(), "--batch-jsonl", batch, what="tokenizing")
            return json.loads(out.splitlines()[0])

    def detokenize(self, ids):
        return self.call("detokenize", self.text_model(), ",".join(map(str, ids)), what="detokenizing")

    @staticmethod
    def _chat_files(tmp, case):
        messages = case.messages if case.messages is not None else [{"role": "user", "content": case.prompt}]
        path = Path(tmp) / "messages.json"
        path.write_text(json.dumps(messages), encoding="utf-8")
        args = ["--messages", path]
        if case.tools is not None:
            tools = Path(tmp) / "tools.json"
            tools.write_text(json.dumps(case.tools), encoding="utf-8")
            args += ["--tools", tools]
        return args


def binary_sha256(binary):
    try:
        return sha256_file(binary)
    except OSError as e:
        raise SuiteError(f"cannot read the binary {binary}: {e}") from None


def present_tables(store_dir):
    """Expert precisions whose tables the store holds."""
    return {bits for bits, names in TABLE_FILES.items() if all((Path(store_dir) / n).is_file() for n in names)}


def model_identity(engine, inspected):
    """Who the model is, without where it lives: its index ID and source (a Hub repository and
    commit, or only the source's kind for local paths), and the hash of the store's manifest."""
    store_dir = inspected.get("path")
    if not store_dir or inspected.get("kind") != "cherenkov-store":
        raise SuiteError(f"{engine.model}: not a prepared store (run cherenkov prepare first)")
    identity = {"model_id": None, "alias": None, "source": None,
                "manifest_sha256": sha256_file(Path(store_dir) / "manifest.json")}
    listing = engine.model_list()
    real = os.path.realpath(store_dir)
    for entry in listing.get("models", []):
        store = entry.get("store") or {}
        paths = [store.get("path")] + [e.get("path") for e in entry.get("exports") or [] if isinstance(e, dict)]
        if any(p and os.path.realpath(p) == real for p in paths):
            source = entry.get("source") or {}
            kind = source.get("kind")
            public = {"kind": kind}
            if kind == "hf":
                public.update(uri=source.get("uri"), repo=source.get("repo"), commit=source.get("commit"))
            elif kind == "disk":
                public.update(uri=source.get("uri"))
            identity.update(model_id=entry.get("id"), alias=entry.get("alias"), source=public)
            break
    return identity


def store_work(text):
    """The lines a run printed about index or store work before loading (building a low-bit
    table, publishing a new store, repairing metadata, waiting for another process): a sample
    that did any of it measured setup, not inference."""
    found = []
    for line in text.splitlines():
        if line.startswith("load: "):
            break
        if line.startswith(("prepare: ", "cherenkov: ")):
            found.append(line)
    return found


def parse_generation_stderr(text):
    """The figures one `cherenkov MODEL 'prompt'` run printed, or None for the ones missing."""
    figures = {}
    if m := LOAD_RE.search(text):
        figures["load_s"] = float(m.group(1))
    if m := PREFILL_RE.search(text):
        figures["prefill"] = {"tokens": int(m.group(1)), "seconds": float(m.group(2)), "tok_s": float(m.group(3)),
                              "chunks": int(m.group(4)), "chunk_tokens": int(m.group(5))}
    if m := DECODE_RE.search(text):
        figures["decode"] = {"tokens": int(m.group(1)), "seconds": float(m.group(2)), "tok_s": float(m.group(3)),
                             "steps": int(m.group(4)), "stop": m.group(5)}
    if m := MTP_RE.search(text):
        a1, p1, a2, p2 = map(int, m.groups())
        figures["mtp"] = {"draft1_accepted": a1, "draft1_proposed": p1, "draft2_accepted": a2, "draft2_proposed": p2}
    if m := MEMORY_RE.search(text):
        try:
            figures["memory_stats"] = json.loads(m.group(1))
        except json.JSONDecodeError:
            pass
    if m := BACKEND_RE.search(text):
        figures["backend"] = m.group(1)
    if m := POOL_RE.search(text):
        figures["expert_pool"] = m.group(1)
    return figures
