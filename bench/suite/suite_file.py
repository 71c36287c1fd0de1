"""bench/suite.json (or a custom suite): what the samples are. Parsed strictly: unknown keys,
wrong types and bad values are errors naming the file and the field. The resolved form (prompt
documents read in) is what the report records and what the suite hash covers."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import SuiteError
from .files import canonical_json, sha256_text

FORMAT = "cherenkov-bench-suite"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")
KINDS = ("completion", "pelican")


@dataclass
class Config:
    name: str
    label: str
    experts: int
    miss_experts: int | None = None
    cut_weak: float | None = None
    args: list = field(default_factory=list)

    def engine_args(self):
        args = ["--experts", str(self.experts)]
        if self.miss_experts is not None:
            args += ["--miss-experts", str(self.miss_experts)]
        if self.cut_weak is not None:
            args += ["--cut-weak", repr(self.cut_weak)]
        return args + list(self.args)

    def expert_tables(self):
        """The expert precisions this setting reads (each needs its table in the store)."""
        return sorted({self.experts} | ({self.miss_experts} if self.miss_experts else set()), reverse=True)

    @property
    def timing_dependent(self):
        # A deadline cut skips experts that are late, so output depends on timing (seed).
        return bool(self.cut_weak)


@dataclass
class Case:
    name: str
    title: str
    kind: str
    cap: int
    prompt: str | None = None  # a user message (chat template) or, with raw, the whole text
    raw: bool = False
    messages: list | None = None  # a conversation rendered by `cherenkov prompt`, run raw
    tools: list | None = None
    rounds: int | None = None  # runs only in the first N rounds (None: every round)


@dataclass
class Suite:
    path: Path
    description: str
    context: int
    drafts: int
    rounds: int
    cycle_check_seconds: float
    power_check_seconds: float
    sample_timeout_seconds: float | None
    args: list
    configs: list
    cases: list
    light: dict
    resolved: dict  # the suite as recorded in the report (documents inlined)

    @property
    def sha256(self):
        return sha256_text(canonical_json(self.resolved))

    def config(self, name):
        return next(c for c in self.configs if c.name == name)

    def case(self, name):
        return next(c for c in self.cases if c.name == name)


class _Reader:
    """Typed access to one JSON object with the path of every field, for error messages."""

    def __init__(self, path, where, obj, allowed):
        self.path, self.where, self.obj = path, where, obj
        if not isinstance(obj, dict):
            self.fail(where, "must be an object")
        for key in obj:
            if key not in allowed:
                self.fail(f"{where}.{key}" if where else key,
                          "unknown field (known: " + ", ".join(sorted(allowed)) + ")")

    def fail(self, field_path, message):
        raise SuiteError(f"{self.path}: {field_path or '(top level)'}: {message}")

    def name(self, key):
        return f"{self.where}.{key}" if self.where else key

    def get(self, key, kind, default=None, required=False):
        if key not in self.obj:
            if required:
                self.fail(self.name(key), "is required")
            return default
        value = self.obj[key]
        ok = isinstance(value, kind) and not (kind in (int, float, (int, float)) and isinstance(value, bool))
        if not ok:
            words = {str: "a string", int: "an integer", float: "a number", (int, float): "a number",
                     bool: "true or false", list: "a list", dict: "an object"}
            self.fail(self.name(key), "must be " + words.get(kind, str(kind)))
        return value

    def positive_int(self, key, default=None, required=False, maximum=None):
        value = self.get(key, int, default, required)
        if value is not None and (value < 1 or (maximum is not None and value > maximum)):
            self.fail(self.name(key), f"must be between 1 and {maximum}" if maximum else "must be at least 1")
        return value

    def positive_number(self, key, default=None):
        value = self.get(key, (int, float), default)
        if value is not None and value <= 0:
            self.fail(self.name(key), "must be above 0")
        return value

    def strings(self, key, default=None):
        value = self.get(key, list, default)
        if value is not None and not all(isinstance(v, str) for v in value):
            self.fail(self.name(key), "must be a list of strings")
        return value


def _read_config(reader_path, index, obj):
    where = f"configs[{index}]"
    r = _Reader(reader_path, where, obj, {"name", "label", "experts", "miss_experts", "cut_weak", "args"})
    name = r.get("name", str, required=True)
    if not NAME_RE.match(name):
        r.fail(where + ".name", "must be lowercase letters, digits and dashes (at most 48)")
    experts = r.get("experts", int, required=True)
    if experts not in (4, 3, 2):
        r.fail(where + ".experts", "must be 4, 3 or 2")
    miss = r.get("miss_experts", int)
    if miss is not None and (miss not in (3, 2) or experts != 4):
        r.fail(where + ".miss_experts", "must be 3 or 2, with experts 4 (Q4 residents)")
    cut = r.get("cut_weak", (int, float))
    if cut is not None and not 0 < cut <= 1:
        r.fail(where + ".cut_weak", "must be in (0, 1]")
    return Config(name=name, label=r.get("label", str, name), experts=experts, miss_experts=miss,
                  cut_weak=float(cut) if cut is not None else None, args=r.strings("args", []))


def _read_case(path, index, obj):
    where = f"cases[{index}]"
    r = _Reader(path, where, obj, {"name", "title", "kind", "cap", "prompt", "raw", "messages", "tools",
                                   "document_file", "document_chars", "rounds"})
    name = r.get("name", str, required=True)
    if not NAME_RE.match(name):
        r.fail(where + ".name", "must be lowercase letters, digits and dashes (at most 48)")
    kind = r.get("kind", str, "completion")
    if kind not in KINDS:
        r.fail(where + ".kind", "must be one of " + ", ".join(KINDS))
    prompt = r.get("prompt", str)
    messages = r.get("messages", list)
    tools = r.get("tools", list)
    if (prompt is None) == (messages is None):
        r.fail(where, "needs exactly one of prompt and messages")
    if tools is not None and messages is None:
        r.fail(where + ".tools", "needs messages (tools go through the chat template)")
    raw = r.get("raw", bool, False)
    if raw and messages is not None:
        r.fail(where + ".raw", "applies to prompt only (messages are rendered by the chat template)")
    document_file = r.get("document_file", str)
    document_chars = r.positive_int("document_chars")
    if document_file is not None:
        if prompt is None or "{document}" not in prompt:
            r.fail(where + ".prompt", "must contain {document} where document_file goes")
        doc_path = (path.parent / document_file)
        try:
            document = doc_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            r.fail(where + ".document_file", f"cannot read {doc_path}: {e}")
        if document_chars is not None:
            document = document[:document_chars]
        prompt = prompt.replace("{document}", document)
    elif document_chars is not None:
        r.fail(where + ".document_chars", "needs document_file")
    if messages is not None:
        for position, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str):
                r.fail(f"{where}.messages[{position}]", "must be an object with a role")
    rounds = r.positive_int("rounds", 1 if kind == "pelican" else None)
    return Case(name=name, title=r.get("title", str, name), kind=kind, cap=r.positive_int("cap", required=True),
                prompt=prompt, raw=raw, messages=messages, tools=tools, rounds=rounds)


def load_suite(path):
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SuiteError(f"{path}: cannot read the suite: {e}") from None
    try:
        top = json.loads(text)
    except json.JSONDecodeError as e:
        raise SuiteError(f"{path}: not valid JSON: {e}") from None
    r = _Reader(path, "", top, {"format", "version", "description", "context", "drafts", "rounds",
                                "cycle_check_seconds", "power_check_seconds", "sample_timeout_seconds",
                                "args", "configs", "cases", "light"})
    if r.get("format", str, required=True) != FORMAT:
        r.fail("format", f'must be "{FORMAT}"')
    if r.get("version", int, required=True) != 1:
        r.fail("version", "must be 1")
    drafts = r.get("drafts", int, 2)
    if drafts not in (0, 1, 2):
        r.fail("drafts", "must be 0, 1 or 2")
    configs = [_read_config(path, i, c) for i, c in enumerate(r.get("configs", list, required=True))]
    cases = [_read_case(path, i, c) for i, c in enumerate(r.get("cases", list, required=True))]
    if not configs:
        r.fail("configs", "must name at least one setting")
    if not cases:
        r.fail("cases", "must name at least one workload")
    for label, items in (("configs", configs), ("cases", cases)):
        seen = set()
        for i, item in enumerate(items):
            if item.name in seen:
                r.fail(f"{label}[{i}].name", f"duplicate name {item.name!r}")
            seen.add(item.name)
    light_obj = r.get("light", dict, {})
    lr = _Reader(path, "light", light_obj, {"cases", "rounds"})
    light = {"cases": lr.strings("cases", []), "rounds": lr.positive_int("rounds", 1)}
    for i, name in enumerate(light["cases"]):
        if name not in {c.name for c in cases}:
            lr.fail(f"light.cases[{i}]", f"names no case ({name!r})")
    suite = Suite(path=path, description=r.get("description", str, ""),
                  context=r.positive_int("context", 8192), drafts=drafts,
                  rounds=r.positive_int("rounds", 3, maximum=100),
                  cycle_check_seconds=float(r.positive_number("cycle_check_seconds", 30)),
                  power_check_seconds=float(r.positive_number("power_check_seconds", 30)),
                  sample_timeout_seconds=r.positive_number("sample_timeout_seconds"),
                  args=r.strings("args", []), configs=configs, cases=cases, light=light, resolved={})
    suite.resolved = _resolved(suite)
    return suite


def _resolved(suite):
    def case_dict(c):
        d = {"name": c.name, "title": c.title, "kind": c.kind, "cap": c.cap, "rounds": c.rounds}
        if c.prompt is not None:
            d.update(prompt=c.prompt, raw=c.raw)
        else:
            d.update(messages=c.messages, tools=c.tools)
        return d

    return {"format": FORMAT, "version": 1, "description": suite.description, "context": suite.context,
            "drafts": suite.drafts, "rounds": suite.rounds, "cycle_check_seconds": suite.cycle_check_seconds,
            "power_check_seconds": suite.power_check_seconds,
            "sample_timeout_seconds": suite.sample_timeout_seconds, "args": suite.args,
            "configs": [{"name": c.name, "label": c.label, "experts": c.experts, "miss_experts": c.miss_experts,
                         "cut_weak": c.cut_weak, "args": c.args} for c in suite.configs],
            "cases": [case_dict(c) for c in suite.cases], "light": suite.light}
