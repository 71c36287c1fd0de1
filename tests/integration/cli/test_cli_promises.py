"""The CLI keeps its documented promises on bad input (issue 28): the seed's command names are
never models, usage errors exit 2 with real bounds in their messages, --max-ctx is checked against
the prompt, the output, the draft headroom, the model and memory before the model loads, and
`prompt --tools` applies the server's tool rules."""
import json
import os
import re
import shutil

import pytest

from conftest import REPO

MODEL = REPO / "models" / "tiny-python"
# Loading the model logs how the expert pool was sized at info level: a context error with no
# such line came before the model loaded.
LOGGED = dict(os.environ, CHERENKOV_LOG="info")


@pytest.fixture(scope="module")
def store(run_cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("promises") / "store"
    run_cli("prepare", MODEL, "--output", out)
    return out


@pytest.fixture(scope="module")
def store_copy(store, tmp_path_factory):
    """A copy of the store, its config.json changed by `edit_config`."""
    def make(edit_config):
        out = tmp_path_factory.mktemp("edited") / "store"
        shutil.copytree(store, out)
        config = json.loads((out / "config.json").read_text())
        edit_config(config.get("text_config", config))
        (out / "config.json").write_text(json.dumps(config))
        return out
    return make


def assert_one_line(stderr):
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("cherenkov: "), stderr
    return lines[0]


# ---- reserved command names ----

@pytest.mark.parametrize("name", ["status", "stats", "dash", "config"])
def test_seed_monitoring_commands_are_built_and_never_models(run_cli, name):
    # Issue 31 built them: each has its own help, and without a server says so in one line.
    result = run_cli(name, "--help", check=False)
    assert result.returncode == 0, result.stderr
    assert "Generate text" not in result.stdout and "not built yet" not in result.stderr


def test_config_without_a_server_says_so_in_one_line(run_cli, tmp_path):
    result = run_cli("config", "show", "--socket", tmp_path / "none.sock", check=False)
    assert result.returncode == 1
    assert "none.sock" in assert_one_line(result.stderr)


def test_serve_is_never_taken_for_a_model(run_cli):
    # `serve` is either built (its own help) or reserved; never run's help or a model lookup.
    result = run_cli("serve", "--help", check=False)
    assert "Generate text" not in result.stdout
    assert "alias or ID" not in result.stderr
    if result.returncode != 0:
        assert result.returncode == 1
        assert "`serve` is not built yet (issue 29" in assert_one_line(result.stderr)


@pytest.mark.parametrize("name", ["prepare", "inspect", "model", "store", "paths", "status", "stats"])
def test_seed_command_names_are_not_models(run_cli, name):
    result = run_cli(name, "--help", check=False)
    assert "Generate text" not in result.stdout
    assert "alias or ID" not in result.stderr


# ---- usage errors exit 2 ----

@pytest.mark.parametrize("args, message", [
    (["inspect"], "model is required"),
    (["inspect", "a", "b"], "not expected"),
    ([], "subcommand is required"),
    (["paths", "--no-such-flag"], "--no-such-flag"),
    (["model", "list", "extra"], "not expected"),
    (["tokenize"], "model is required"),
    (["run", "m"], "prompt is required"),
    (["m", "p", "--max-tokens", "abc"], "--max-tokens"),
    (["m", "p", "--experts", "5"], "--experts"),
    (["m", "p", "--drafts", "3"], "--drafts"),
])
def test_parse_errors_exit_2_in_the_projects_form(run_cli, args, message):
    result = run_cli(*args, check=False)
    assert result.returncode == 2, (args, result.returncode, result.stderr)
    line = assert_one_line(result.stderr)
    assert message in line
    assert "--help" in line


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["inspect", "--help"], ["run", "--help"],
                                  ["model", "list", "--help"]])
def test_help_and_version_exit_0(run_cli, args):
    result = run_cli(*args, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout


@pytest.mark.parametrize("args, bound", [
    (["m", "p", "--max-ctx", "0"], "--max-ctx: must be at least 1, got 0"),
    (["m", "p", "--max-tokens", "-1"], "--max-tokens: must be at least 0, got -1"),
    (["m", "p", "--repeat", "0"], "--repeat: must be at least 1, got 0"),
    (["m", "p", "--top-k", "-2"], "--top-k: must be at least 0, got -2"),
    (["m", "p", "--threads", "-1"], "--threads: must be at least 0, got -1"),
    (["m", "p", "--io-threads", "0"], "--io-threads: must be at least 1, got 0"),
    (["m", "p", "--prefill-quantum", "0"], "--prefill-quantum: must be 1 to 65536, got 0"),
    (["m", "p", "--prefill-quantum", "65537"], "--prefill-quantum: must be 1 to 65536, got 65537"),
    (["bench", "m", "--prompt-tokens", "0"], "--prompt-tokens: must be at least 1, got 0"),
    (["bench", "m", "--gen-tokens", "0"], "--gen-tokens: must be at least 1, got 0"),
    (["bench", "m", "--repeat", "0"], "--repeat: must be at least 1, got 0"),
    (["logits", "m", "--tokens", "1", "--top", "0"], "--top: must be at least 1, got 0"),
    (["perplexity", "m", "f", "--ctx", "1"], "--ctx: must be at least 2, got 1"),
    (["m", "p", "--max-ctx", "1.5"], "--max-ctx: expected an integer at least 1, got '1.5'"),
])
def test_numeric_flags_show_their_real_bounds(run_cli, args, bound):
    result = run_cli(*args, check=False)
    assert result.returncode == 2, result.stderr
    line = assert_one_line(result.stderr)
    assert bound in line
    assert not re.search(r"\d{20}", line), line  # no double-sized limits


# ---- --max-ctx before load ----

def test_output_that_cannot_fit_fails_before_load(run_cli, store):
    result = run_cli(store, "def f(x):", "--raw", "--max-tokens", "32", "--max-ctx", "8", check=False, env=LOGGED)
    assert result.returncode == 1, result.stderr
    line = assert_one_line(result.stderr)
    assert "--max-tokens 32" in line and "--max-ctx 8" in line and "--drafts 2" in line, line
    assert "need a context of" in line
    assert result.stdout == ""


def test_draft_headroom_counts_only_when_drafts_run(run_cli, store):
    prompt = run_cli("tokenize", store, "def f(x):", "--json").stdout
    n = len(json.loads(prompt)["ids"])
    ctx = n + 4
    # Greedy with two drafts needs prompt + 4 + 2.
    result = run_cli(store, "def f(x):", "--raw", "--max-tokens", "4", "--max-ctx", str(ctx), check=False)
    assert result.returncode == 1 and "--drafts 2" in result.stderr
    result = run_cli(store, "def f(x):", "--raw", "--max-tokens", "4", "--max-ctx", str(ctx), "--drafts", "0")
    assert "stop: length" in result.stderr
    result = run_cli(store, "def f(x):", "--raw", "--max-tokens", "2", "--max-ctx", str(ctx))
    assert "stop: length" in result.stderr


def test_a_prompt_longer_than_the_context_fails_before_load(run_cli, store):
    result = run_cli(store, "def f(x): return x + 1", "--raw", "--max-ctx", "3", check=False, env=LOGGED)
    assert result.returncode == 1, result.stderr
    line = assert_one_line(result.stderr)
    assert re.search(r"the prompt has \d+ tokens, more than --max-ctx 3 allows", line), line


def test_a_context_past_the_models_positions_is_refused(run_cli, store):
    result = run_cli(store, "x", "--raw", "--max-ctx", "100000000", check=False, env=LOGGED)
    assert result.returncode == 1, result.stderr
    line = assert_one_line(result.stderr)
    assert "--max-ctx 100000000 is more than the model's 4096 positions" in line
    assert "max_position_embeddings" in line
    assert "bad_alloc" not in result.stderr


def test_a_context_without_memory_says_how_much_it_needs(run_cli, store_copy):
    unlimited = store_copy(lambda c: c.pop("max_position_embeddings", None))
    result = run_cli(unlimited, "x", "--raw", "--max-ctx", "100000000000", check=False, env=LOGGED)
    assert result.returncode == 1, result.stderr
    line = assert_one_line(result.stderr)
    match = re.search(r"--max-ctx 100000000000 needs ([\d.]+ [kMGTPE]B) of sequence state; "
                      r"this machine has ([\d.]+ [kMGTPE]?B|\d+ bytes) available", line)
    assert match, line
    assert "internal error" not in line
    # A context that fits still runs on that store.
    result = run_cli(unlimited, "x", "--raw", "--max-tokens", "2", "--max-ctx", "5000")
    assert "stop: length" in result.stderr


@pytest.mark.parametrize("args, subject", [
    (["perplexity", "{store}", str(MODEL / "heldout_sample.txt"), "--ctx", "5000"], "--ctx 5000 is more than"),
    (["bench", "{store}", "--prompt-tokens", "5000"], "a context of 5036 tokens (--prompt-tokens 5000"),
    (["logits", "{store}", "--tokens", ",".join(["1"] * 5000)], "--tokens (5000 tokens) is more than"),
    (["logits", "{store}", "--text", "x " * 5000], "--text ("),
])
def test_other_commands_check_their_context_before_load(run_cli, store, args, subject):
    result = run_cli(*[a.replace("{store}", str(store)) for a in args], check=False, env=LOGGED)
    assert result.returncode == 1, result.stderr
    line = assert_one_line(result.stderr)
    assert subject in line and "4096 positions" in line, line


# ---- prompt --tools ----

def tool(name, **extra):
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": {}}, **extra}}


@pytest.mark.parametrize("tools, message", [
    ([tool("bad name")], "tools[0].function.name"),
    ([tool("ok"), tool("ok")], "tools[1]"),
    ([tool("ok", strict=True)], "strict"),
    ({"type": "function"}, "tools"),
])
def test_prompt_applies_the_servers_tool_rules(run_cli, tmp_path, tools, message):
    (tmp_path / "messages.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    (tmp_path / "tools.json").write_text(json.dumps(tools))
    result = run_cli("prompt", MODEL, "--messages", tmp_path / "messages.json", "--tools", tmp_path / "tools.json",
                     check=False)
    assert result.returncode == 1, result.stderr
    line = assert_one_line(result.stderr)
    assert str(tmp_path / "tools.json") in line and message in line, line
    assert result.stdout == ""


def test_prompt_accepts_valid_tools(run_cli, tmp_path):
    (tmp_path / "messages.json").write_text(json.dumps([{"role": "user", "content": "hi"}]))
    (tmp_path / "tools.json").write_text(json.dumps([tool("get_weather-2")]))
    result = run_cli("prompt", MODEL, "--messages", tmp_path / "messages.json", "--tools", tmp_path / "tools.json")
    assert "hi" in result.stdout


def test_prompt_requires_a_user_message(run_cli, tmp_path):
    (tmp_path / "messages.json").write_text(json.dumps([{"role": "system", "content": "be brief"}]))
    result = run_cli("prompt", MODEL, "--messages", tmp_path / "messages.json", check=False)
    assert result.returncode == 1, result.stderr
    assert "user" in assert_one_line(result.stderr)
