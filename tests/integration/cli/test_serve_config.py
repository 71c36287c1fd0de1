"""The configuration of `cherenkov serve` (docs/configuration.md) on the bundled model
(models/tiny-python): --print-config without loading the model, with the precedence defaults <
file < explicit flags; every serve flag has a key; a bad file's message names the file, line and
key; reload through SIGHUP and `cherenkov config reload` changes the defaults of the requests that
start after it and not of one running; a refused reload leaves every setting as it was; sessions
keep their committed settings."""
import json
import re
import signal
import subprocess
import time
import tomllib

import pytest

from conftest import REPO
from serve_harness import Server

MODEL = REPO / "models" / "tiny-python"
EXAMPLE = REPO / "cherenkov.example.toml"
# Flags that are no setting: what to read, what to do, CLI diagnostics.
# --tuning: developers' A/B settings, deliberately not part of an operator's configuration.
COMMAND_ONLY = {"--config", "--print-config", "--check", "--repack", "--help", "--tuning"}


def print_config(run_cli, *args, env=None):
    result = run_cli("serve", *args, "--print-config", env=env)
    return result.stdout, tomllib.loads(result.stdout)


def sources(text):
    """{"limits.max_active": "file", ...} from --print-config's comments."""
    out, section = {}, None
    for line in text.splitlines():
        if line.startswith("["):
            section = line.strip("[]")
        elif "=" in line and not line.startswith("#"):
            key = line.split("=", 1)[0].strip()
            out[f"{section}.{key}"] = line.rsplit("# ", 1)[1].split(" ")[0]
    return out


def test_print_config_applies_defaults_then_the_file_then_explicit_flags(run_cli, tmp_path):
    config = tmp_path / "conf" / "cherenkov.toml"
    config.parent.mkdir()
    config.write_text('[server]\nmodel_dir = "../stores/tiny"\n[limits]\nmax_active = 4\n'
                      'max_queued = 8\n[experts]\npool_gb = 3\n'
                      '[defaults.sampling]\ntemperature = 0.7\n')
    # --max-queued and --pool-gb equal the built-in defaults: given, they still win.
    text, settings = print_config(run_cli, "--config", config, "--max-queued", "16",
                                  "--pool-gb", "adaptive", "--port", "9001")
    assert settings["server"]["model_dir"] == str(tmp_path / "stores" / "tiny")
    assert settings["limits"]["max_active"] == 4
    assert settings["limits"]["max_queued"] == 16
    assert settings["experts"]["pool_gb"] == "adaptive"
    assert settings["server"]["port"] == 9001
    assert settings["server"]["max_ctx"] == 4096
    assert settings["defaults"]["sampling"]["temperature"] == 0.7
    origin = sources(text)
    assert origin["limits.max_active"] == "file"
    assert origin["limits.max_queued"] == "flag"
    assert origin["experts.pool_gb"] == "flag"
    assert origin["server.max_ctx"] == "default"
    assert f"configuration file: {config}" in text
    # A MODEL argument replaces the file's model_dir.
    _, settings = print_config(run_cli, "small-moe", "--config", config)
    assert settings["server"]["model"] == "small-moe" and settings["server"]["model_dir"] == ""


def test_print_config_reads_the_default_file_only_when_it_exists(run_cli, tmp_path):
    env = dict(__import__("os").environ, XDG_CONFIG_HOME=str(tmp_path))
    paths = json.loads(run_cli("paths", "--json", env=env).stdout)
    text, settings = print_config(run_cli, env=env)
    assert "configuration file: none" in text
    assert settings["limits"]["max_active"] == 2
    default_file = tmp_path / "cherenkov" / "cherenkov.toml"
    assert paths["config"] == str(default_file)
    default_file.parent.mkdir()
    default_file.write_text("[limits]\nmax_active = 3\n")
    text, settings = print_config(run_cli, env=env)
    assert f"configuration file: {default_file}" in text
    assert settings["limits"]["max_active"] == 3


def test_the_example_file_holds_every_default(run_cli, tmp_path):
    env = dict(__import__("os").environ, XDG_CONFIG_HOME=str(tmp_path))
    _, defaults = print_config(run_cli, env=env)
    _, example = print_config(run_cli, "--config", EXAMPLE)
    assert example == defaults
    assert tomllib.loads(EXAMPLE.read_text()) == defaults


def test_every_serve_flag_sets_a_key(run_cli, tmp_path):
    help_text = run_cli("serve", "--help").stdout
    flags = set(re.findall(r"(?m)^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", help_text))
    assert "--max-active" in flags and "--pool-gb" in flags
    env = dict(__import__("os").environ, XDG_CONFIG_HOME=str(tmp_path))
    text, _ = print_config(run_cli, env=env)
    mapped = set(re.findall(r"\((--[a-z0-9-]+)\)$", text, re.M))
    assert flags - COMMAND_ONLY == mapped, (flags - COMMAND_ONLY) ^ mapped


def test_a_bad_file_is_refused_naming_the_file_line_and_key(run_cli, tmp_path):
    config = tmp_path / "bad.toml"
    config.write_text("[limits]\nmax_active = 2\n\nmax_queued = 100000\n")
    result = run_cli("serve", MODEL, "--config", config, check=False)
    assert result.returncode == 1
    assert f"{config}:4: limits.max_queued: must be an integer from 0 to 4096, got 100000" \
        in result.stderr
    config.write_text("[limits]\nmax_activ = 2\n")
    result = run_cli("serve", MODEL, "--config", config, "--print-config", check=False)
    assert result.returncode == 1
    assert f"{config}:2: unknown key 'limits.max_activ'" in result.stderr
    config.write_text('[server]\nmodel = "a"\nmodel_dir = "/b"\n')
    result = run_cli("serve", "--config", config, "--print-config", check=False)
    assert result.returncode == 1 and "exclusive" in result.stderr
    assert f"server.model ({config}:2)" in result.stderr
    result = run_cli("serve", MODEL, "--config", tmp_path / "missing.toml", check=False)
    assert result.returncode == 1 and "missing.toml" in result.stderr


# ---- a running server ----

START = """[server]
socket = "ctl/control.sock"
[defaults]
max_tokens = {max_tokens}
stop_at_eos = false
[defaults.sampling]
temperature = {temperature}
"""


@pytest.fixture
def configured(cherenkov_bin, store, tmp_path):
    """A server started from a configuration file in tmp_path. The harness gives it its own
    control socket with --socket, which overrides the file's server.socket."""
    config = tmp_path / "cherenkov.toml"
    config.write_text(START.format(max_tokens=5, temperature=0.0))
    server = Server(cherenkov_bin, store, "--config", config)
    server.config = config
    yield server
    server.close()


def completion_tokens(server, **fields):
    status, _, body = server.post("/v1/completions", {"prompt": "def is_prime(n):", **fields})
    assert status == 200, body
    return body["usage"]["completion_tokens"]


def session_temperature(server, sid):
    status, _, body = server.request("GET", f"/v1/sessions/{sid}")
    assert status == 200, body
    return body["sampling"]["temperature"]


def wait_for(server, text, timeout=30):
    deadline = time.monotonic() + timeout
    while text not in server.stderr():
        assert time.monotonic() < deadline, server.stderr()
        time.sleep(0.05)


def test_sighup_reloads_the_defaults_of_later_requests(configured):
    assert completion_tokens(configured) == 5
    status, _, session = configured.post("/v1/sessions", {})
    assert status == 200 and session["sampling"]["temperature"] == 0.0
    configured.config.write_text(START.format(max_tokens=7, temperature=0.9))
    configured.proc.send_signal(signal.SIGHUP)
    wait_for(configured, "configuration reloaded: generation 2, changed defaults.max_tokens, "
                         "defaults.sampling.temperature")
    assert completion_tokens(configured) == 7
    assert completion_tokens(configured, max_tokens=2) == 2
    # The session keeps the settings it committed; a new one takes the new defaults.
    assert session_temperature(configured, session["id"]) == 0.0
    status, _, later = configured.post("/v1/sessions", {})
    assert later["sampling"]["temperature"] == pytest.approx(0.9)
    # The same file again: nothing changes, the generation stays.
    configured.proc.send_signal(signal.SIGHUP)
    wait_for(configured, "configuration reloaded: generation 2, nothing changed")
    assert configured.stop() == 0, configured.stderr()


def test_a_refused_sighup_reload_keeps_every_setting(configured):
    configured.config.write_text(START.format(max_tokens=9, temperature=0.0) +
                                 "[limits]\nmax_active = 3\n")
    configured.proc.send_signal(signal.SIGHUP)
    wait_for(configured, "configuration reload refused")
    assert "limits.max_active" in configured.stderr()
    assert completion_tokens(configured) == 5


def config_cli(run_cli, server, *args):
    return run_cli("config", *args, "--socket", server.socket, check=False)


def test_config_reload_changes_later_requests_and_not_a_running_one(configured, run_cli):
    shown = json.loads(config_cli(run_cli, configured, "show", "--json").stdout)
    assert shown["generation"] == 1 and shown["file"] == str(configured.config)
    assert shown["settings"]["defaults"]["max_tokens"] == 5
    assert shown["sources"]["defaults.max_tokens"] == "file"
    assert shown["sources"]["server.socket"] == "flag"
    assert shown["settings"]["server"]["socket"] == str(configured.socket)
    text = config_cli(run_cli, configured, "show").stdout
    assert tomllib.loads(text)["defaults"]["max_tokens"] == 5

    configured.config.write_text(START.format(max_tokens=2000, temperature=0.0))
    assert config_cli(run_cli, configured, "reload").returncode == 0
    # A long request runs on its snapshot while the defaults change under it.
    events = configured.stream("/v1/completions", {"prompt": "def is_prime(n):", "stream": True,
                                                   "stream_options": {"include_usage": True}})
    next(events)
    configured.config.write_text(START.format(max_tokens=3, temperature=0.0))
    result = config_cli(run_cli, configured, "reload", "--json")
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    assert answer["ok"] and answer["generation"] == 3 and answer["changed"] == ["defaults.max_tokens"]
    rest = list(events)
    assert len(rest) > 2, "the request ended before the reload"
    usage = [e["usage"] for e in rest if isinstance(e, dict) and e.get("usage")]
    assert usage[-1]["completion_tokens"] == 2000
    assert completion_tokens(configured) == 3


def test_a_refused_config_reload_leaves_the_settings_intact(configured, run_cli):
    configured.config.write_text(START.format(max_tokens=9, temperature=0.5) +
                                 "[prefix_cache]\nmax_entries = 3\n")
    result = config_cli(run_cli, configured, "reload")
    assert result.returncode == 1
    assert "changes prefix_cache.max_entries (nothing was reloaded)" in result.stderr
    configured.config.write_text("[defaults]\nmax_tokens = -1\n")
    result = config_cli(run_cli, configured, "reload")
    assert result.returncode == 1 and f"{configured.config}:2: defaults.max_tokens" in result.stderr
    shown = json.loads(config_cli(run_cli, configured, "show", "--json").stdout)
    assert shown["generation"] == 1
    assert shown["settings"]["defaults"]["max_tokens"] == 5
    assert shown["settings"]["defaults"]["sampling"]["temperature"] == 0.0
    assert completion_tokens(configured) == 5
