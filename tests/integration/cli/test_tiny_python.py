"""The bundled trained model (models/tiny-python) through Cherenkov against its PyTorch record:
greedy continuations token for token (with and without MTP drafts), the held-out perplexity,
and MTP drafts that are actually accepted."""
import json
import re

import pytest

from conftest import REPO

MODEL = REPO / "models" / "tiny-python"
RECORD = json.loads((MODEL / "training_record.json").read_text())


@pytest.fixture(scope="module")
def store(run_cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-python") / "store"
    run_cli("prepare", MODEL, "--output", out)
    return out


@pytest.mark.parametrize("name", ["class", "fibonacci", "list_files"])
def test_greedy_generation_matches_pytorch(run_cli, store, name):
    sample = RECORD["generation"]["samples"][name]
    n = 48
    ids = ",".join(map(str, sample["greedy_ids"][:n]))
    expected = run_cli("detokenize", store, ids).stdout
    for drafts in ("0", "2"):
        result = run_cli(store, sample["prompt"], "--raw", "--max-tokens", str(n), "--no-eos", "--drafts", drafts)
        assert result.stdout == expected + "\n", f"drafts {drafts}"


def test_mtp_drafts_are_accepted(run_cli, store):
    sample = RECORD["generation"]["samples"]["fibonacci"]
    result = run_cli(store, sample["prompt"], "--raw", "--max-tokens", "64", "--no-eos", "--drafts", "2")
    match = re.search(r"mtp: draft 1 accepted (\d+)/(\d+), draft 2 accepted (\d+)/(\d+)", result.stderr)
    assert match
    a1, p1, a2, p2 = map(int, match.groups())
    assert p1 > 0 and a1 / p1 > 0.5 and p2 > 0


def test_heldout_perplexity_matches_pytorch(run_cli, store):
    out = json.loads(run_cli("perplexity", store, MODEL / "heldout_sample.txt", "--ctx", "256", "--json").stdout)
    assert out["scored_tokens"] == 11811
    # PyTorch on the Q4-dequantized checkpoint: NLL 2.4127905 (README "Perplexity to compare").
    assert abs(out["mean_nll"] - 2.4127905) < 1e-3


def test_text_commands_and_generation_accept_index_selectors(run_cli, tmp_path):
    # prepare registers the model; its ID then selects it for every command.
    out = json.loads(run_cli("prepare", MODEL, "--name", "tiny-py", "--json").stdout)
    assert out
    ids = run_cli("tokenize", "tiny-py", "def f(x):").stdout.split("\n")[0]
    assert ids == run_cli("tokenize", MODEL, "def f(x):").stdout.split("\n")[0]
    assert run_cli("tiny-py", "def f(x):", "--raw", "--max-tokens", "4").stdout.strip()
