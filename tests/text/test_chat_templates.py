"""Chat template rendering: `cherenkov prompt` against Jinja2 and transformers.

Every template under tests/data is rendered over a set of conversations, both by
`$CHERENKOV_BIN prompt DIR --messages F [--tools F]` and by Jinja2 set up exactly as
transformers' `_compile_jinja_template` sets it up (and, when transformers is importable, by
`AutoTokenizer.apply_chat_template(tokenize=False)` on a tokenizer directory made here). The
outputs must be byte-identical; conversations the template itself rejects must fail on both
sides, with the same message when the template calls raise_exception(). Generic Jinja probes run
the same way with the probe as the chat template. Expected outputs are always computed here, at
test time, by the reference implementations. Skipped when CHERENKOV_BIN is unset.
"""

import copy
import datetime
import json
import os
import pathlib
import shutil
import subprocess

import pytest

jinja2 = pytest.importorskip("jinja2")
from jinja2.ext import loopcontrols  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
TOKENIZER_FILES = DATA / "tokenizer-qwen2-qwen3"
TEMPLATES = sorted(DATA.glob("chat-template-*/*.jinja"))
BIN = os.environ.get("CHERENKOV_BIN")

pytestmark = [
    pytest.mark.skipif(not BIN, reason="CHERENKOV_BIN is not set"),
    # One probe checks that an unknown escape such as \d stays as written; Jinja2 warns about it.
    pytest.mark.filterwarnings("ignore:invalid escape sequence:DeprecationWarning"),
]

try:  # transformers is optional: the Jinja2 reference below mirrors it when it is missing.
    import transformers  # noqa: F401
    from transformers import AutoTokenizer

    HAVE_TRANSFORMERS = True
except ImportError:  # pragma: no cover - depends on the environment
    HAVE_TRANSFORMERS = False


# ---- the reference: Jinja2 configured like transformers' _compile_jinja_template ----------------


class TemplateRaised(Exception):
    """raise_exception() in the reference render."""


def _reference_environment():
    def raise_exception(message):
        raise TemplateRaised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    class TemplateDict:
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    class TemplateNamespace(jinja2.utils.Namespace):
        def __init__(*args, **kwargs):
            self, args = args[0], args[1:]
            attrs = dict(*args, **kwargs)
            for name in attrs:
                TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__init__(self, attrs)

        def __setitem__(self, name, value):
            TemplateNamespace._check_name(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check_name(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"underscore-prefixed namespace attribute {name!r}")

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


ENV = _reference_environment()
SPECIAL_TOKENS = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}  # tokenizer_config.json


def normalize_messages(messages):
    """What the renderer promises to hand the template (chat_message.h / chat_template.h):
    developer becomes system, JSON-string tool arguments become objects, null fields vanish
    (as in apply_chat_template), reasoning also appears as `thinking` (as transformers aliases it)."""
    out = []
    for message in copy.deepcopy(messages):
        message = {k: v for k, v in message.items() if v is not None}
        if message.get("role") == "developer":
            message["role"] = "system"
        for call in message.get("tool_calls", []):
            arguments = call["function"].get("arguments")
            if isinstance(arguments, str):
                call["function"]["arguments"] = json.loads(arguments)
        reasoning = message.get("reasoning_content")
        if reasoning is not None:
            message = {"thinking": reasoning, **message, "reasoning_content": reasoning}
        out.append(message)
    return out


def reference_render(source, context):
    """('ok', text) or ('raised', message) or ('error', description)."""
    kwargs = {
        "messages": normalize_messages(context["messages"]),
        "add_generation_prompt": context.get("add_generation_prompt", True),
        "enable_thinking": context.get("enable_thinking", False),
        **SPECIAL_TOKENS,
    }
    if context.get("tools"):
        kwargs["tools"] = context["tools"]
    try:
        return ("ok", ENV.from_string(source).render(**kwargs))
    except TemplateRaised as e:
        return ("raised", str(e))
    except Exception as e:  # noqa: BLE001 - any Jinja2 failure is an expected failure here
        return ("error", f"{type(e).__name__}: {e}")


# ---- the system under test -------------------------------------------------------------------


def make_model_dir(root, source):
    """A tokenizer directory as a checkpoint ships it, with `source` as chat_template.jinja."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("vocab.json", "merges.txt"):  # large and read-only: linked, not copied
        (root / name).symlink_to(TOKENIZER_FILES / name)
    shutil.copyfile(TOKENIZER_FILES / "tokenizer_config.json", root / "tokenizer_config.json")
    (root / "chat_template.jinja").write_text(source, encoding="utf-8")
    return root


def run_prompt(model_dir, context, tmp_path, extra=()):
    messages_file = tmp_path / "messages.json"
    messages_file.write_text(json.dumps(context["messages"], ensure_ascii=False), encoding="utf-8")
    command = [BIN, "prompt", str(model_dir), "--messages", str(messages_file), *extra]
    if context.get("tools"):
        tools_file = tmp_path / "tools.json"
        tools_file.write_text(json.dumps(context["tools"], ensure_ascii=False), encoding="utf-8")
        command += ["--tools", str(tools_file)]
    if not context.get("add_generation_prompt", True):
        command.append("--no-generation-prompt")
    if context.get("enable_thinking", False):
        command.append("--enable-thinking")
    return subprocess.run(command, capture_output=True, timeout=60)


# ---- conversations ---------------------------------------------------------------------------

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "  Get the current weather for a city.\n",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "extras": {"type": ["array", "null"], "items": {"type": "string"}},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web — returns snippets «quoted».",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "filters": {"type": "object", "properties": {"site": {"type": "string"}, "year": {"type": "number"}}},
            },
            "required": ["query"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]


def call(name, arguments, call_id=None):
    entry = {"type": "function", "function": {"name": name, "arguments": arguments}}
    if call_id:
        entry["id"] = call_id
    return entry


CONTEXTS = {
    "plain": {"messages": [{"role": "user", "content": "Hello!"}]},
    "multi_turn": {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me a joke."},
        ]
    },
    "system": {
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "Explain hash tables."},
        ]
    },
    "developer": {
        "messages": [
            {"role": "developer", "content": "Always answer in French."},
            {"role": "user", "content": "Good morning"},
        ]
    },
    "tools_defined": {"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": TOOLS},
    "tools_with_system": {
        "messages": [{"role": "system", "content": "Use tools when useful."}, {"role": "user", "content": "Weather?"}],
        "tools": TOOLS,
    },
    "tool_call_round_trip": {
        "messages": [
            {"role": "user", "content": "What's the weather in Paris for 3 days?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call("get_weather", {"city": "Paris", "days": 3, "extras": ["wind", "uv"], "opts": {"a": {"b": [1, 2.5]}}}, "call_1")
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 21, "sky": "clear"}'},
        ],
        "tools": TOOLS,
    },
    "tool_call_string_arguments": {
        "messages": [
            {"role": "user", "content": "Search for cats"},
            {"role": "assistant", "content": None, "tool_calls": [call("search", '{"query": "cats", "filters": {"year": 2024}}')]},
            {"role": "tool", "content": "3 results"},
            {"role": "assistant", "content": "I found 3 results."},
            {"role": "user", "content": "Thanks"},
        ],
        "tools": TOOLS,
    },
    "parallel_calls_consecutive_results": {
        "messages": [
            {"role": "user", "content": "Weather in Rome and Tokyo"},
            {
                "role": "assistant",
                "content": "Checking both.",
                "tool_calls": [
                    call("get_weather", {"city": "Rome"}, "a"),
                    call("get_weather", {"city": "東京", "unit": "celsius"}, "b"),
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "Rome: 25C"},
            {"role": "tool", "tool_call_id": "b", "content": "東京: 18C"},
        ],
        "tools": TOOLS,
    },
    "argument_types": {
        "messages": [
            {"role": "user", "content": "Numbers please"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    call(
                        "search",
                        {
                            "query": "π ≈ 3.14 \"quoted\" \\ back\nslash",
                            "int": 42,
                            "neg": -7,
                            "float": 1.5,
                            "tiny": 1e-07,
                            "huge": 1e20,
                            "exact": 100.0,
                            "flag": True,
                            "off": False,
                            "nothing": None,
                            "empty_list": [],
                            "empty_obj": {},
                            "nested": [{"k": [1, {"deep": "yes"}]}, "s"],
                            "emoji": "🚀✨",
                        },
                    )
                ],
            },
            {"role": "tool", "content": "ok"},
        ],
    },
    "empty_content": {
        "messages": [
            {"role": "user", "content": ""},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": "again"},
        ]
    },
    "null_assistant_content": {
        "messages": [
            {"role": "user", "content": "Call it"},
            {"role": "assistant", "content": None, "tool_calls": [call("search", {"query": "x"})]},
            {"role": "tool", "content": "done"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "ok"},
        ]
    },
    "content_parts": {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Part one. "}, {"type": "text", "text": "Part two."}]},
        ]
    },
    "unicode_emoji": {
        "messages": [
            {"role": "system", "content": "Réponds en français. 日本語も可。"},
            {"role": "user", "content": "Ünïcödé ☃ 🎉👩‍💻 \u200b zero-width, ß, İ, Σ"},
        ]
    },
    "reasoning_content": {
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Simple arithmetic: 2+2=4."},
            {"role": "user", "content": "And 3+3?"},
            {"role": "assistant", "content": "6", "reasoning_content": "\nAgain simple.\n"},
        ],
        "add_generation_prompt": False,
    },
    "inline_think_tags": {
        "messages": [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "<think>\nThe user greets.\n</think>\n\nHello!"},
            {"role": "user", "content": "Bye"},
        ]
    },
    "no_generation_prompt": {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        "add_generation_prompt": False,
    },
    "enable_thinking": {"messages": [{"role": "user", "content": "Think about it."}], "enable_thinking": True},
    "enable_thinking_with_tools": {
        "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "Weather?"}],
        "tools": TOOLS,
        "enable_thinking": True,
    },
    "multi_step_agent": {
        "messages": [
            {"role": "system", "content": "Agent mode."},
            {"role": "user", "content": "Plan a trip"},
            {"role": "assistant", "content": "", "reasoning_content": "need weather", "tool_calls": [call("get_weather", {"city": "Lima"})]},
            {"role": "tool", "content": "Lima: 19C"},
            {"role": "assistant", "content": "", "reasoning_content": "now search", "tool_calls": [call("search", {"query": "Lima hotels"})]},
            {"role": "tool", "content": "Hotel A, Hotel B"},
        ],
        "tools": TOOLS,
    },
    "special_text": {
        "messages": [
            {"role": "user", "content": "Quotes ' \" backslash \\ braces {{ x }} {% if %} <|im_end|> <tool_call> tabs\tand\r\nCRLF"},
            {"role": "assistant", "content": "  padded  \n\n"},
            {"role": "user", "content": "<tool_response>not really</tool_response> trailing"},
        ]
    },
    "tool_messages_with_names": {
        "messages": [
            {"role": "user", "content": "Go"},
            {"role": "assistant", "content": "Calling.", "tool_calls": [call("search", {"query": "go"}, "id-9")]},
            {"role": "tool", "tool_call_id": "id-9", "name": "search", "content": "result text"},
            {"role": "user", "content": "Summarize"},
        ],
        "tools": [SEARCH_TOOL],
    },
    "long_history": {
        "messages": [m for turn in range(6) for m in (
            {"role": "user", "content": f"Question {turn}: {'why ' * turn}?"},
            {"role": "assistant", "content": f"Answer {turn}.", "reasoning_content": f"thinking {turn}" if turn % 2 else None},
        )] + [{"role": "user", "content": "Last one"}]
    },
    # The template decides: Qwen3.5 rejects a conversation whose only user turns are tool
    # responses; older templates render it.
    "only_tool_response_user": {
        "messages": [{"role": "user", "content": "<tool_response>\n42\n</tool_response>"}],
    },
    # Several templates dereference message.content without checking it.
    "null_user_content": {"messages": [{"role": "user", "content": None}]},
}


# Token ids are compared for these (loading the tokenizer takes most of a second per run).
TOKEN_CHECKED = {"plain", "tool_call_round_trip", "argument_types", "unicode_emoji", "special_text", "multi_step_agent"}


def check_against_reference(source, context, model_dir, tmp_path):
    expected = reference_render(source, context)
    result = run_prompt(model_dir, context, tmp_path)
    stdout = result.stdout.decode("utf-8", errors="replace")
    stderr = result.stderr.decode("utf-8", errors="replace")
    if expected[0] == "ok":
        assert result.returncode == 0, f"cherenkov failed: {stderr}"
        assert result.stdout == expected[1].encode("utf-8"), f"\nexpected {expected[1]!r}\n     got {stdout!r}"
    else:
        assert result.returncode == 1, f"reference failed ({expected[1]}) but cherenkov printed {stdout!r}"
        if expected[0] == "raised":
            assert stderr == f"cherenkov: {expected[1]}\n"
    return expected


@pytest.mark.parametrize("context_name", sorted(CONTEXTS))
@pytest.mark.parametrize("template_path", TEMPLATES, ids=lambda p: p.name)
def test_template_matches_jinja2(template_path, context_name, tmp_path):
    source = template_path.read_text(encoding="utf-8")
    model_dir = make_model_dir(tmp_path / "model", source)
    check_against_reference(source, CONTEXTS[context_name], model_dir, tmp_path)


@pytest.fixture(scope="module")
def transformers_tokenizers(tmp_path_factory):
    if not HAVE_TRANSFORMERS:
        pytest.skip("transformers is not installed")
    tokenizers = {}
    for template_path in TEMPLATES:
        model_dir = make_model_dir(tmp_path_factory.mktemp("hf") / "model", template_path.read_text(encoding="utf-8"))
        tokenizers[template_path] = (model_dir, AutoTokenizer.from_pretrained(str(model_dir)))
    return tokenizers


def transformers_render(tokenizer, context, tokenize):
    return tokenizer.apply_chat_template(
        normalize_messages(context["messages"]),
        tools=context.get("tools") or None,
        tokenize=tokenize,
        return_dict=False,
        add_generation_prompt=context.get("add_generation_prompt", True),
        enable_thinking=context.get("enable_thinking", False),
    )


@pytest.mark.parametrize("context_name", sorted(CONTEXTS))
@pytest.mark.parametrize("template_path", TEMPLATES, ids=lambda p: p.name)
def test_template_matches_transformers(template_path, context_name, transformers_tokenizers, tmp_path):
    model_dir, tokenizer = transformers_tokenizers[template_path]
    context = CONTEXTS[context_name]
    try:
        expected = ("ok", transformers_render(tokenizer, context, tokenize=False))
    except jinja2.exceptions.TemplateError as e:
        expected = ("raised" if type(e) is jinja2.exceptions.TemplateError else "error", str(e))
    except Exception as e:  # noqa: BLE001
        expected = ("error", f"{type(e).__name__}: {e}")
    result = run_prompt(model_dir, context, tmp_path)
    if expected[0] == "ok":
        assert result.returncode == 0, result.stderr.decode()
        assert result.stdout == expected[1].encode("utf-8")
        if context_name not in TOKEN_CHECKED:
            return
        tokens = run_prompt(model_dir, context, tmp_path, extra=["--tokens"])
        assert tokens.returncode == 0, tokens.stderr.decode()
        assert json.loads(tokens.stdout) == transformers_render(tokenizer, context, tokenize=True)
    else:
        assert result.returncode == 1
        if expected[0] == "raised":
            assert result.stderr.decode() == f"cherenkov: {expected[1]}\n"


def test_every_template_is_covered():
    assert len(TEMPLATES) >= 9
    assert len(CONTEXTS) >= 20


# ---- conversation rules checked before any template runs -------------------------------------

REJECTED = {
    "system_not_first": (
        [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}],
        "messages/1: a system (or developer) message may only come first",
    ),
    "developer_not_first": (
        [{"role": "user", "content": "a"}, {"role": "developer", "content": "late"}],
        "messages/1: a system (or developer) message may only come first",
    ),
    "no_user": ([{"role": "system", "content": "s"}], "messages: the conversation must contain a user message"),
    "unknown_role": (
        [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}],
        "messages/1/role: unknown role 'bot'",
    ),
    "bad_arguments": (
        [{"role": "user", "content": "a"}, {"role": "assistant", "tool_calls": [call("f", "{not json")]}],
        "messages/1/tool_calls/0/function/arguments: not valid JSON",
    ),
    "image_part": (
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
        "messages/0/content/0/type: unsupported content part type 'image_url'",
    ),
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_conversation_rules(case, tmp_path):
    messages, message = REJECTED[case]
    model_dir = make_model_dir(tmp_path / "model", TEMPLATES[0].read_text(encoding="utf-8"))
    result = run_prompt(model_dir, {"messages": messages}, tmp_path)
    assert result.returncode == 1
    assert message in result.stderr.decode()


def test_falls_back_to_tokenizer_config(tmp_path):
    model_dir = make_model_dir(tmp_path / "model", "unused")
    (model_dir / "chat_template.jinja").unlink()
    config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    context = CONTEXTS["tool_call_round_trip"]
    expected = reference_render(config["chat_template"], context)
    result = run_prompt(model_dir, context, tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == expected[1].encode("utf-8")


def test_named_default_template_in_config(tmp_path):
    model_dir = make_model_dir(tmp_path / "model", "unused")
    (model_dir / "chat_template.jinja").unlink()
    config = json.loads((model_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    config["chat_template"] = [
        {"name": "tool_use", "template": "TOOLS {{ messages|length }}"},
        {"name": "default", "template": "DEFAULT {{ messages[0].content }}{{ eos_token }}"},
    ]
    (model_dir / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    result = run_prompt(model_dir, CONTEXTS["plain"], tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout == b"DEFAULT Hello!<|im_end|>"


# ---- generic Jinja probes through the same path -----------------------------------------------

PRELUDE = (
    "{%- set l = [3, 1, 2] -%}{%- set d = {'a': 1, 'items': 2, 'z': none} -%}{%- set s = 'Hello World' -%}"
    "{%- set u = 'héllo wörld ß' -%}{%- set e = [] -%}{%- set f = 1.5 -%}"
)
PROBES = [
    "{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}",
    "{% for i in [1,2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}",
    "{% macro m() %}{{ y }}{% endmacro %}{% set y = 5 %}{{ m() }}{% set y = 6 %}{{ m() }}",
    "{% macro m() %}[{{ message }}]{% endmacro %}{% for message in messages %}{{ m() }}{% endfor %}",
    "{{ d['items'] }}{{ d.items()|list }}{{ d.keys()|list }}{{ d.get('q', 5) }}{{ d.items() }}",
    "{{ l.append }}|{{ l[10] }}|{{ l[-1] }}{{ l[1:] }}{{ l[::-1] }}{{ 'abc'[::-1] }}{{ u[1] }}{{ u|length }}",
    "{{ l.append(1) }}",
    "{{ nothing.attribute }}",
    "{{ d.zz.y }}",
    "{{ '<' + ('a'|safe) }}|{{ ('a'|safe) + '<' }}|{{ [('x'|safe)] }}|{{ 'a<'|e }}",
    "{{ 1.0 }} {{ 1e20 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1/3 }} {{ -0.0 }} {{ 2**0.5 }}",
    "{{ {'a': [1, 'x\u00e9\\n', none, true, 1.5]} }}{{ (1,) }}{{ () }}{{ (1, 'b') }}",
    "{{ \"a'b\" }}|{{ [\"a'b\"] }}|{{ ['a\"b'] }}|{{ [\"a'b\\\"\"] }}|{{ ['\\x01\\t\\u200b'] }}",
    "{% for i in range(3) %}{{ loop.previtem }}{{ loop.nextitem }}{{ loop.index0 }}{{ loop.revindex0 }};{% endfor %}",
    "{{ '%s-%d|%5.2f|%-4d|%r|%x|%o|%e|%g|%%' % ('a', 3, 3.14159, 7, 'q', 255, 8, 12345.678, 0.0001) }}",
    "{{ '{}-{}|{:>6}|{:<4}|{:^7}|{:.3f}|{:,}|{:+d}|{!r}|{k}'.format(1, 2, 'r', 'l', 'c', 2.5, 1234567, 5, 'x', k='K') }}",
    "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ l|tojson(separators=(',', ':')) }}|{{ {'b': 1, 'a': [2]}|tojson(sort_keys=true) }}|{{ 'é<'|tojson }}|{{ 'é'|tojson(ensure_ascii=true) }}",
    "{{ x is defined }}{{ x is undefined }}{{ x is iterable }}{{ x is sequence }}{{ 'a' in x }}{{ x == y }}{{ x is callable }}",
    "{{ l is sequence }}{{ d is sequence }}{{ d is mapping }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ none is none }}{{ 'A' is upper }}{{ 'a' is lower }}",
    "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 1 is in [1] }}{{ 2 is eq 2 }}{{ 3 is gt 2 }}{{ 'x' is string }}{{ l is not string }}{{ none is sameas none }}",
    "{{ x|default('d') }}{{ none|default('d') }}{{ ''|default('d', true) }}{{ x|d }}",
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 3 / 2 }} {{ 4 / 2 }} {{ 'ab' * 3 }} {{ [1] * 2 }} {{ 1 + true }} {{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ -3 % 5 }}",
    "{{ 1 < 2 < 3 }}{{ 1 == 1.0 }}{{ [1, 2] < [1, 3] }}{{ 'a' < 'b' }}{{ 2 > 3 > 1 }}{{ (1, 2) == (1, 2) }}{{ [1] == (1,) }}",
    "{% for k in d %}{{ k }}{% endfor %}{% for k, v in d|items %}{{ k }}={{ v }}{% endfor %}{% for a in 'hé' %}<{{ a }}>{% endfor %}",
    "{{ ns }}{% set ns = namespace(a=1) %}{{ ns }}{{ ns.b }}{% set ns.b = [1] %}{{ ns.b }}",
    "{% macro m(a, b=2) %}{{ a }}{{ b }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m }}{{ m(1) }}{{ m(1, 3, 4, c=5) }}{{ m.name }}{{ m.arguments }}",
    "{% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }}",
    "{{ 'a b  c'.split() }}{{ 'a,b,,c'.split(',') }}{{ ' x '.strip() }}{{ 'a-b-c'.rsplit('-', 1) }}{{ 'x\\ny\\r\\nz'.splitlines() }}{{ 'abc'.find('c') }}{{ 'héé'.find('é') }}{{ 'aaa'.count('a') }}",
    "{{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith(('x', 'lo')) }}{{ 'ab'.upper() }}{{ 'AB'.lower() }}{{ 'hello world'.title() }}{{ 'hELLO'.capitalize() }}{{ 'x'.center(5, '*') }}{{ '42'.zfill(5) }}{{ '-'.join(['a', 'b']) }}",
    "{{ 'a=b=c'.partition('=') }}{{ 'a=b=c'.rpartition('=') }}{{ 'prefix_x'.removeprefix('prefix_') }}{{ '  '.isspace() }}{{ 'abc1'.isalnum() }}{{ '12'.isdigit() }}{{ 'Title Case'.istitle() }}",
    "{% if true %}  a  {% endif %}\n  {% if true %}\n  x\n  {% endif %}\nend",
    "a {#- c -#} b {# c #}\n  {# indented comment #}\nc",
    "line1  \n  {%- if true -%}  \n  y  \n  {%+ endif %}\nz",
    "{% raw %}{{ not evaluated }}{% endraw %}\n  {% raw -%}  x  {%- endraw %}",
    "{{- '  stripped  ' -}}  \n  {{ 'kept' }}  \n{%- if true %}\n  block\n{%- endif +%}\nafter",
    "{{ messages[0].content|upper }}{{ messages|length }}{{ messages|map(attribute='role')|join(',') }}{{ messages|selectattr('role', 'equalto', 'user')|list|length }}",
    "{{ messages|selectattr('role', 'equalto', 'user')|length }}",
    "{% if messages|selectattr('role', 'equalto', 'nobody') %}T{% else %}F{% endif %}{% if (messages|selectattr('role', 'equalto', 'nobody')|list) %}T{% else %}F{% endif %}",
    "{{ u|upper }}|{{ u|title }}|{{ u|capitalize }}|{{ s|lower }}|{{ s|wordcount }}|{{ u.title() }}|{{ 'ǅ ß ﬁ'|upper }}|{{ 'ΑΣ Σ'|lower }}",
    "{{ f|round }} {{ 2.5|round }} {{ 2.675|round(2) }} {{ 3|round }} {{ 7.123|round(1, 'floor') }} {{ 7.123|round(1, 'ceil') }} {{ '42'|int }} {{ '4.9'|int }} {{ 'x'|int(7) }} {{ '1e3'|float }} {{ none|float }} {{ ' 12 '|int }} {{ '0x1A'|int(0, 16) }} {{ '1_000'|int }} {{ -3|abs }}",
    "{{ l|sort }}{{ l|sort(reverse=true) }}{{ ['b', 'A', 'a']|sort }}{{ ['b', 'A', 'a']|sort(case_sensitive=true) }}{{ l|max }}{{ l|min }}{{ l|sum }}{{ [1, 1, 2, 'a', 'A']|unique|list }}{{ [{'n': 2}, {'n': 1}]|sort(attribute='n') }}",
    "{{ d|dictsort }}{{ {'b': 1, 'a': 2}|dictsort(by='value') }}{{ l|reverse|list }}{{ 'abc'|reverse }}{{ l|first }}{{ l|last }}{{ e|first }}{{ e|last }}{{ l|list }}{{ 'ab'|list }}",
    "{{ '  hi  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(2, blank=true) }}|{{ 'a\\nb'|indent('> ') }}",
    "{{ 'hello world foo bar'|truncate(9) }}|{{ 'hello world foo bar'|truncate(9, true) }}|{{ 'hi'|center(7) }}|{{ '%s and %s'|format('a', 'b') }}|{{ 'a'|replace('a', 'bb') }}|{{ 'aaa'|replace('a', 'b', 2) }}",
    "{{ l|batch(2)|list }}{{ l|slice(2)|list }}{{ [[1, 2], [3]]|map('length')|list }}{{ l|select('odd')|list }}{{ l|reject('odd')|list }}{{ l|map('string')|join }}{{ [{'a': 1}, {}]|map(attribute='a', default=0)|list }}",
    "{{ [{'a': 1}, {'a': 0}, {}]|selectattr('a')|list }}{{ [{'a': 1}, {'a': 0}]|rejectattr('a')|list }}{{ messages|selectattr('role', 'in', ['user'])|map(attribute='content')|first }}",
    "{{ 'a' ~ 1 ~ none ~ x ~ [1] }}",
    "{{ 'a' + x }}",
    "{{ 1 + 'a' }}",
    "{{ 'x' if false }}|{{ 'x' if true }}|{{ ('x' if false)|default('d') }}|{{ 1 if 0 else 2 if 0 else 3 }}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set (c, d2) = [3, 4] %}{{ c }}{{ d2 }}{% for (p, q), r in [((1, 2), 3)] %}{{ p }}{{ q }}{{ r }}{% endfor %}",
    "{% set a, b = [1, 2, 3] %}",
    "{% for a, b in [[1, 2], [3, 4]] %}{{ a }}{{ b }}{% else %}none{% endfor %}{% for x in [] %}{% else %}empty{% endfor %}",
    "{% for x in l if x > 1 %}{{ loop.index }}/{{ loop.length }}:{{ x }} {% else %}none{% endfor %}",
    "{% for x in l %}{% if x == 1 %}{% break %}{% endif %}{{ x }}{% endfor %}|{% for x in l %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}",
    "{% set ns = namespace(total=0, names=[]) %}{% for x in l %}{% set ns.total = ns.total + x %}{% set ns.names = ns.names + [x] %}{% endfor %}{{ ns.total }}{{ ns.names }}",
    "{% macro outer(x) %}<{{ caller(x) }}>{% endmacro %}{% call(y) outer(5) %}[{{ y }}]{% endcall %}{% macro plain() %}({{ caller() }}){% endmacro %}{% call plain() %}body{% endcall %}",
    "{% filter upper %}abc{{ s }}{% endfilter %}{% set blk %}B{{ 1 }}{% endset %}{{ blk }}{% set blk2 | trim | upper %}  z  {% endset %}[{{ blk2 }}]",
    "{% with q = 5, r = 6 %}{{ q }}{{ r }}{% endwith %}[{{ q }}]",
    "{{ range(5)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ range(0)|list }}",
    "{{ range(100001)|length }}",
    "{{ dict(a=1, b=2) }}{{ dict([('x', 1)]) }}{{ dict(d, q=3) }}",
    "{{ raise_exception('Custom failure: ' ~ messages|length) }}",
    "{% if messages[0].role != 'system' %}{{ raise_exception('System message is required.') }}{% endif %}",
    "{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{{ loop.first }}{{ loop.last }}{{ loop.revindex }}{{ loop.length }}{{ loop.depth }}{% endfor %}",
    "{% for x in [1, 1, 2] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}",
    "{% for item in [{'c': [{'c': []}]}, {'c': []}] recursive %}<{{ loop.depth }}{{ loop(item.c) }}>{% endfor %}",
    "{% set c = cycler('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}{{ c.current }}{% set j = joiner('|') %}{{ j() }}x{{ j() }}y",
    "{{ 'x' is filter }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ l|count }}{{ 'a\\tb'|wordcount }}",
    "{% set x = 'outer' %}{% block b %}{{ x }}{% endblock %}",
    "{{ undefined_function() }}",
    "{{ l|no_such_filter }}",
    "{% if false %}{{ l|no_such_filter }}{% endif %}ok",
    "{{ x is no_such_test }}",
    "{% unknown_tag %}",
    "{% for %}",
    "{{ (1 }}",
    "{{ 'unterminated }}",
    "{{ 1 ++ }}",
    "{% if x %}never closed",
    "{% endfor %}",
    "{{ 5 / 0 }}",
    "{{ 'a' < 1 }}",
    "{{ [1, 2] + (3,) }}",
    "{{ {'a': 1}['b'] }}|{{ {'a': 1}.b }}|{{ {'a': 1}[[1]] }}|{{ 'abc'['x'] }}|{{ none.x }}|{{ (1).real }}{{ 1.5.is_integer() }}",
    "{{ messages[5].content }}",
    "{% set ns = namespace() %}{% set ns._private = 1 %}",
    "{% set y = 1 %}{% set y.attr = 2 %}",
    "{{ '%(name)s is %(age)d' % {'name': 'Ann', 'age': 30} }}{{ '%s' % [1, 2] }}{{ '%5s|%-5s|' % ('é', 'ü') }}",
    "{{ 'not enough %s %s' % ('a',) }}",
    "{{ '{0}{1}{0}'.format('a', 'b') }}{{ '{:*^9}'.format('mid') }}{{ '{:08.3f}'.format(-3.14159) }}{{ '{:x}{:o}{:b}{:#x}'.format(255, 8, 5, 255) }}{{ '{:.2%}'.format(0.256) }}{{ '{:e}'.format(12345.6789) }}{{ '{:g}'.format(1e-5) }}{{ '{:.3}'.format(100.0) }}{{ '{}'.format(none) }}",
    "{{ 9007199254740993 }} {{ 9007199254740993 / 1 }} {{ 0.1 + 0.2 }} {{ 1e300 * 1e10 }} {{ -1e300 * 1e10 }} {{ 10 ** 18 }} {{ 123456789.123456789 }}",
    "{{ 'tab\\there' }}{{ 'a\\\\b' }}{{ '\\u00e9\\U0001F600\\x41\\101\\n' }}{{ 'sq\\'s' }}{{ \"dq\\\"s\" }}{{ 'unknown \\d escape' }}",
    "{{ s[0] }}{{ s[-1] }}{{ s[2:5] }}{{ s[:3] }}{{ s[::2] }}{{ s[100:] }}{{ s[-100:2] }}{{ l[1:2] }}",
    "{{ l|join(', ') }}|{{ messages|map(attribute='content')|join(' / ') }}|{{ [1, 'a', none]|join }}|{{ d|join(',') }}",
    "{{ messages|tojson }}",
    "{{ messages[0]|items|list }}{{ messages[0].keys()|list }}{{ messages[0]|length }}",
    "{% set t = (1, 2) %}{{ t[0] }}{{ t|length }}{{ t + (3,) }}{{ 2 in t }}{{ t.count(1) }}{{ t.index(2) }}",
    "{{ not true }}{{ not none }}{{ not [] }}{{ true and 'x' }}{{ false or 'y' }}{{ none or 0 or '' }}{{ 1 and 0 }}",
    "{{ -1|abs }}{{ - 2 ** 2 }}{{ (-2) ** 2 }}{{ 2 ** 3 ** 2 }}{{ 10 - 2 - 3 }}{{ 2 * 3 + 4 }}{{ 'a' ~ 2 + 3 }}",
    "{{ [1, 2, 3][1] }}{{ {'k': 'v'}.k }}{{ {'k': 'v'}['k'] }}{{ [[1, 2], [3]][0][1] }}{{ messages.0.role }}",
    "{{ 'a' in 'abc' }}{{ 'z' not in 'abc' }}{{ 1 in [1, 2] }}{{ 'a' in {'a': 1} }}{{ none in [none] }}",
    "{{ 1 in 'abc' }}",
    "{% set long = 'x' * 10 %}{{ long|length }}{{ long[:3] }}",
    "{{ strftime_now('%Y') | length }}",
    "{% for i in range(3) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{% endfor %}{% endfor %}",
    "{% macro rec(n) %}{{ n }}{% if n > 0 %}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }}",
    "{%- for m in messages -%}\n  {{- m.role }}: {{ m.content }}\n{% endfor -%}\n",
    "{{ messages[0].content.split(' ')|map('upper')|join('_') }}{{ messages[0].get('missing', 'dflt') }}{{ messages[0].content is string }}",
    "{{ '{}'.format is callable }}{{ 'x'.upper is defined }}{{ 'x'.nope is defined }}",
]


@pytest.fixture(scope="module")
def probe_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("probe")


PROBE_CONTEXT = {"messages": [{"role": "user", "content": "Hello probe world"}, {"role": "assistant", "content": "Reply"}]}


@pytest.mark.parametrize("index", range(len(PROBES)))
def test_jinja_probe(index, tmp_path):
    source = PRELUDE + PROBES[index]
    model_dir = make_model_dir(tmp_path / "model", source)
    check_against_reference(source, PROBE_CONTEXT, model_dir, tmp_path)
