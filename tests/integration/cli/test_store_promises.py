"""Issue 28, the store's promises, end to end on the bundled tiny-python model prepared into a
temporary index: a missing low-bit table is built at load and published as a new store (or, with
--no-build-missing-store, the error names a prepare command that works when pasted), mixed mode
and --cut-weak are checked before load, --drafts 0 leaves the MTP head out, an --output export
never moves the model nor lets gc delete its variants, variant builds and metadata repairs
publish new stores while readers keep theirs, and `prepare` of a file says what it expects."""
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO

MODEL = REPO / "models" / "tiny-python"
PROMPT = ("def add(a, b):", "--raw", "--max-tokens", "4", "--backend", "cpu")


@pytest.fixture(scope="module")
def prepared(run_cli, tmp_path_factory):
    """tiny-python prepared (Q4 only) under --root, as the alias tiny-python."""
    root = tmp_path_factory.mktemp("prepared") / "data"
    run_cli("prepare", MODEL, "--name", "tiny-python", "--root", root)
    return root


@pytest.fixture
def root(prepared, tmp_path):
    """A private copy of the prepared index (managed paths are relative to the data root)."""
    copy = tmp_path / "data"
    shutil.copytree(prepared, copy)
    return copy


def listed(run_cli, root):
    models = json.loads(run_cli("model", "list", "--json", "--root", root).stdout)["models"]
    return next(model for model in models if model["reference"] == "tiny-python")


def memory_stats(stderr):
    line = next(line for line in stderr.splitlines() if line.startswith("memory_stats "))
    return json.loads(line[len("memory_stats "):])


def suggested_command(stderr):
    """The command quoted in backticks in an error message, as argv."""
    match = re.search(r"`(cherenkov [^`]*)`", stderr)
    assert match, stderr
    return shlex.split(match.group(1))


def run_pasted(cherenkov_bin, argv):
    assert argv[0] == "cherenkov"
    return subprocess.run([cherenkov_bin, *argv[1:]], capture_output=True, text=True, timeout=120)


def test_a_missing_variant_is_built_at_load_as_a_new_store(run_cli, root):
    before = listed(run_cli, root)
    assert before["store"]["variants"] == [4]
    result = run_cli("tiny-python", *PROMPT, "--experts", "3", "--root", root)
    assert result.returncode == 0 and result.stdout.strip()
    assert "prepare: experts3" in result.stderr  # progress on stderr
    assert "publishing a new store of tiny-python" in result.stderr
    assert memory_stats(result.stderr)["expert_bits"] == 3
    after = listed(run_cli, root)
    assert after["store"]["variants"] == [4, 3]
    assert after["store"]["path"] != before["store"]["path"]
    # The old store is whole until gc collects it; the new one shares its unchanged files.
    old, new = Path(before["store"]["path"]), Path(after["store"]["path"])
    assert not (old / "experts3.bin").exists()
    assert os.stat(old / "experts.bin").st_ino == os.stat(new / "experts.bin").st_ino
    gc = json.loads(run_cli("model", "gc", "--json", "--root", root).stdout)
    assert any(item["path"] == str(old) and item["action"] == "delete" for item in gc["items"])
    assert not old.exists() and (new / "experts3.bin").exists()
    # Built once: the next load finds it.
    again = run_cli("tiny-python", *PROMPT, "--experts", "3", "--root", root)
    assert "prepare: experts3" not in again.stderr


def test_repack_rebuilds_the_selected_variant_as_a_new_store(run_cli, root):
    run_cli("tiny-python", *PROMPT, "--experts", "3", "--root", root)
    built = listed(run_cli, root)
    first = run_cli("tiny-python", *PROMPT, "--experts", "3", "--root", root)
    # Seed "Prepare": --repack rebuilds the selected low-bit table at startup, even when valid,
    # and publishes it as a new store; without building missing stores it still runs.
    repacked = run_cli("tiny-python", *PROMPT, "--experts", "3", "--repack",
                       "--no-build-missing-store", "--root", root)
    assert "prepare: experts3" in repacked.stderr  # rebuilt, with progress
    assert "publishing a new store of tiny-python" in repacked.stderr
    after = listed(run_cli, root)
    assert after["store"]["variants"] == [4, 3]
    old, new = Path(built["store"]["path"]), Path(after["store"]["path"])
    assert old != new and (old / "experts3.bin").exists()
    assert os.stat(old / "experts3.bin").st_ino != os.stat(new / "experts3.bin").st_ino
    assert os.stat(old / "experts.bin").st_ino == os.stat(new / "experts.bin").st_ino
    assert repacked.stdout == first.stdout  # the same derivation, the same greedy text
    # Q4 alone has no low-bit table to rebuild.
    q4 = run_cli("tiny-python", *PROMPT, "--repack", "--root", root, check=False)
    assert q4.returncode == 1 and "--repack rebuilds the low-bit expert table" in q4.stderr


def test_without_building_the_error_names_a_command_that_works(run_cli, cherenkov_bin, root):
    result = run_cli("tiny-python", *PROMPT, "--experts", "2", "--no-build-missing-store",
                     "--root", root, check=False)
    assert result.returncode == 1
    assert "no Q2 expert table" in result.stderr and "building missing stores at load is off" in result.stderr
    command = suggested_command(result.stderr)
    assert command == ["cherenkov", "prepare", "tiny-python", "--experts", "2", "--root", str(root)]
    assert listed(run_cli, root)["store"]["variants"] == [4]  # nothing was built
    pasted = run_pasted(cherenkov_bin, command)
    assert pasted.returncode == 0, pasted.stderr
    assert "derived experts2.bin" in pasted.stdout
    run_cli("tiny-python", *PROMPT, "--experts", "2", "--no-build-missing-store", "--root", root)


def test_a_store_given_by_path_gets_a_pasteable_command_too(run_cli, cherenkov_bin, root, tmp_path):
    loose = tmp_path / "loose store"
    shutil.copytree(listed(run_cli, root)["store"]["path"], loose)
    result = run_cli(loose, *PROMPT, "--experts", "3", "--no-build-missing-store", "--root", root, check=False)
    assert result.returncode == 1
    command = suggested_command(result.stderr)
    assert command[:3] == ["cherenkov", "prepare", str(loose)] and "--experts" in command
    pasted = run_pasted(cherenkov_bin, command)
    assert pasted.returncode == 0, pasted.stderr
    assert (loose / "experts3.bin").exists()  # the user's directory, changed in place
    run_cli(loose, *PROMPT, "--experts", "3", "--no-build-missing-store", "--root", root)


def test_mixed_mode_requires_four_bit_residents(run_cli, root):
    result = run_cli("tiny-python", *PROMPT, "--experts", "3", "--miss-experts", "2", "--root", root, check=False)
    assert result.returncode == 1
    assert "--miss-experts 2 needs 4-bit residents (--experts 4)" in result.stderr
    assert listed(run_cli, root)["store"]["variants"] == [4]  # refused before anything was built
    ok = run_cli("tiny-python", *PROMPT, "--experts", "4", "--miss-experts", "2", "--root", root)
    assert ok.returncode == 0


@pytest.mark.parametrize("value", ["-1", "1.5"])
def test_cut_weak_out_of_range_is_rejected_by_name(run_cli, root, value):
    result = run_cli("tiny-python", *PROMPT, f"--cut-weak={value}", "--root", root, check=False)
    assert result.returncode == 1
    assert "--cut-weak" in result.stderr and "out of range" in result.stderr
    assert "load:" not in result.stderr


def test_cut_weak_in_range_runs(run_cli, root):
    assert run_cli("tiny-python", *PROMPT, "--cut-weak", "0.05", "--root", root).returncode == 0


def test_drafts_zero_omits_the_draft_head(run_cli, root):
    with_head = memory_stats(run_cli("tiny-python", *PROMPT, "--drafts", "2", "--root", root).stderr)
    without = run_cli("tiny-python", *PROMPT, "--drafts", "0", "--root", root)
    trunk = memory_stats(without.stderr)
    assert with_head["draft_head"] is True and trunk["draft_head"] is False
    assert trunk["dense_bytes"] < with_head["dense_bytes"]
    assert trunk["state_bytes"] < with_head["state_bytes"]
    assert "mtp:" not in without.stderr


def test_an_export_does_not_move_the_model_and_gc_keeps_its_variants(run_cli, root, tmp_path):
    # The sequence of issue 28: variants, then an export of the same source, then gc.
    run_cli("prepare", "tiny-python", "--experts", "4,3,2", "--root", root)
    store = listed(run_cli, root)["store"]
    assert store["variants"] == [4, 3, 2]
    export = tmp_path / "export"
    result = run_cli("prepare", MODEL, "--output", export, "--root", root)
    assert "export recorded; the model keeps running from its store" in result.stdout
    entry = listed(run_cli, root)
    assert entry["store"]["path"] == store["path"]
    assert [item["path"] for item in entry["exports"]] == [str(export)]
    run_cli("model", "gc", "--root", root)
    assert (Path(store["path"]) / "experts3.bin").exists() and (Path(store["path"]) / "experts2.bin").exists()
    assert (export / "manifest.json").exists()
    assert [item["path"] for item in listed(run_cli, root)["exports"]] == [str(export)]
    run_cli("tiny-python", *PROMPT, "--experts", "2", "--no-build-missing-store", "--root", root)
    text = run_cli("model", "list", "--root", root).stdout
    assert f"exported to {export}" in text


def test_prepare_repairs_missing_metadata_into_a_new_store(run_cli, root):
    store = Path(listed(run_cli, root)["store"]["path"])
    (store / "chat_template.jinja").unlink()
    chat = ("tiny-python", "Write is_prime(n).", "--max-tokens", "2", "--backend", "cpu", "--root", root)
    broken = run_cli(*chat, "--no-build-missing-store", check=False)
    assert broken.returncode == 1 and "chat" in broken.stderr.lower()
    result = run_cli("prepare", "tiny-python", "--root", root)
    assert "repaired chat_template.jinja" in result.stdout and "published" in result.stdout
    repaired = Path(listed(run_cli, root)["store"]["path"])
    assert repaired != store
    assert (repaired / "chat_template.jinja").read_bytes() == (MODEL / "chat_template.jinja").read_bytes()
    assert not (store / "chat_template.jinja").exists()  # readers of the old store keep theirs
    assert run_cli(*chat).returncode == 0


def test_loading_repairs_missing_metadata_too(run_cli, root):
    store = Path(listed(run_cli, root)["store"]["path"])
    (store / "chat_template.jinja").unlink()
    result = run_cli("tiny-python", "Write is_prime(n).", "--max-tokens", "2", "--backend", "cpu", "--root", root)
    assert result.returncode == 0
    assert (Path(listed(run_cli, root)["store"]["path"]) / "chat_template.jinja").exists()


def test_prepare_of_a_file_says_what_it_expects(run_cli, root):
    result = run_cli("prepare", MODEL / "config.json", "--root", root, check=False)
    assert result.returncode == 1
    assert "expected a checkpoint directory or a packed store directory, not a file" in result.stderr
    assert "header" not in result.stderr
    assert f"`cherenkov prepare {MODEL} --root {root}`" in result.stderr
    result = run_cli("model", "add", MODEL / "tokenizer.json", "--root", root, check=False)
    assert result.returncode == 1
    assert "expected a checkpoint directory or a .safetensors or .gguf file" in result.stderr
