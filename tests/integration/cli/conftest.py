"""Shared helpers for the CLI integration tests: the built binary and a runner."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


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
