"""Shared helpers for the CLI integration tests: the built binary and a runner."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


ISOLATED_VARIABLES = ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "HF_HOME", "HF_TOKEN",
                      "HF_TOKEN_PATH", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT")


@pytest.fixture(scope="session", autouse=True)
def isolated_storage(tmp_path_factory):
    """Every command of the session writes its model index under a temporary directory, never
    in the user's data directory, and sees no Hugging Face credentials or endpoint."""
    base = tmp_path_factory.mktemp("xdg")
    saved = {name: os.environ.get(name) for name in ISOLATED_VARIABLES}
    for name in ISOLATED_VARIABLES:
        os.environ.pop(name, None)
    os.environ.update(XDG_DATA_HOME=str(base / "data"), XDG_CACHE_HOME=str(base / "cache"),
                      XDG_CONFIG_HOME=str(base / "config"), HF_HOME=str(base / "hf"))
    yield base
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def cherenkov_bin():
    path = os.environ.get("CHERENKOV_BIN")
    if not path or not Path(path).exists():
        pytest.skip("CHERENKOV_BIN is not set to a built cherenkov binary")
    return path


@pytest.fixture(scope="session")
def run_cli(cherenkov_bin):
    def run(*args, check=True, env=None):
        result = subprocess.run([cherenkov_bin, *map(str, args)], capture_output=True, text=True, env=env, timeout=120)
        if check and result.returncode != 0:
            raise AssertionError(f"cherenkov {' '.join(map(str, args))} exited {result.returncode}: {result.stderr}")
        return result
    return run


@pytest.fixture(scope="session")
def make_tiny_checkpoint(tmp_path_factory):
    """Writes a tiny random qwen4_exp checkpoint with tools/make_tiny_checkpoint.py."""
    def make(*flags):
        out = tmp_path_factory.mktemp("tiny")
        subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_checkpoint.py"), str(out), *flags], check=True)
        return out
    return make


TINY_PYTHON = REPO / "models" / "tiny-python"
CODER_TEMPLATE = REPO / "tests" / "data" / "chat-template-qwen3-coder" / "Qwen3-Coder.jinja"


@pytest.fixture(scope="session")
def store(run_cli, tmp_path_factory):
    """The bundled tiny-python model prepared once for the session (servers only read it)."""
    out = tmp_path_factory.mktemp("tiny-python") / "store"
    run_cli("prepare", TINY_PYTHON, "--output", out)
    return out


@pytest.fixture(scope="session")
def coder_store(run_cli, tmp_path_factory):
    """The bundled model with a template that renders tools and tool calls (Qwen3-Coder's)."""
    source = tmp_path_factory.mktemp("tiny-python-coder") / "model"
    shutil.copytree(TINY_PYTHON, source)
    shutil.copy(CODER_TEMPLATE, source / "chat_template.jinja")
    out = source.parent / "store"
    run_cli("prepare", source, "--output", out)
    return out


@pytest.fixture(scope="module")
def server(cherenkov_bin, store):
    """A server on the session's tiny-python store, one per test module."""
    from serve_harness import Server  # the harness needs this folder on sys.path, as conftest has

    s = Server(cherenkov_bin, store)
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()
