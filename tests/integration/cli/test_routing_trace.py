"""`--trace-routing` and `--cache-policy` end to end. Every backend writes its trace through one
writer: a CPU trace is well formed (a header, then `step layer row expert:weight ...` lines with
top_k choices, rows in order), and with a CUDA device the GPU's trace of a greedy run names the
CPU's experts line for line. The policy (host slots and, with CUDA, the device pool alike) changes where experts are
kept, never the output: with the smallest pool, lru and frequency give the same greedy text."""
import re

import pytest

from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures"
ARGS = ["def add(a, b):", "--raw", "--max-tokens", "16", "--no-eos", "--drafts", "2"]


@pytest.fixture(scope="module")
def store(run_cli, tmp_path_factory):
    out = tmp_path_factory.mktemp("trace") / "a"
    run_cli("prepare", FIXTURES / "tiny_a" / "hf_flat_fused", "--output", out)
    return out


def parse_trace(path):
    lines = path.read_text().splitlines()
    assert lines[0].startswith("# step layer row expert:weight")
    groups = {}
    for line in lines[1:]:
        step, layer, row, *choices = line.split()
        assert all(re.fullmatch(r"\d+:[-+0-9.e]+", choice) for choice in choices), line
        rows = groups.setdefault((int(step), int(layer)), [])
        assert int(row) == len(rows), line
        rows.append(choices)
    return groups


def smallest_pool(run_cli, store, backend):
    """One layer-step's records, the smallest explicit pool, from the error for a too small one
    (its suggested --pool-gb is rounded up to MB, which holds this tiny table whole)."""
    result = run_cli(store, *ARGS, "--backend", backend, "--pool-gb", "0.000000001", check=False)
    assert result.returncode == 1, result.stderr
    found = re.search(r"records of (\d+) bytes, but one layer-step can select (\d+)", result.stderr)
    return f"{int(found.group(1)) * int(found.group(2)) / 1e9:.9f}"


def test_the_cpu_trace_is_well_formed(run_cli, store, tmp_path):
    trace = tmp_path / "cpu.trace"
    run_cli(store, *ARGS, "--backend", "cpu", "--trace-routing", trace)
    groups = parse_trace(trace)
    assert groups
    widths = {len(choices) for rows in groups.values() for choices in rows}
    assert len(widths) == 1  # top_k choices on every row
    assert max(len(rows) for rows in groups.values()) > 1  # the prompt's rows, drafts


def test_cuda_writes_the_cpu_trace_or_says_why_not(run_cli, store, tmp_path):
    cuda = run_cli(store, *ARGS, "--backend", "cuda", "--trace-routing", tmp_path / "cuda.trace", check=False)
    if cuda.returncode != 0:
        assert "no CUDA device" in cuda.stderr or "built without CUDA" in cuda.stderr
        return
    run_cli(store, *ARGS, "--backend", "cpu", "--trace-routing", tmp_path / "cpu.trace")
    def experts(groups):  # weights may differ in the last digits; the choices may not
        return {key: [[choice.split(":")[0] for choice in row] for row in rows] for key, rows in groups.items()}
    assert experts(parse_trace(tmp_path / "cuda.trace")) == experts(parse_trace(tmp_path / "cpu.trace"))


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_the_cache_policy_never_changes_greedy_text(run_cli, store, backend):
    if backend == "cuda":
        probe = run_cli(store, "hi", "--max-tokens", "1", "--backend", "cuda", check=False)
        if probe.returncode != 0:
            pytest.skip("no CUDA backend here: " + probe.stderr.strip().splitlines()[-1])
    pool = smallest_pool(run_cli, store, backend)
    texts = {policy: run_cli(store, *ARGS, "--backend", backend, "--pool-gb", pool,
                             "--cache-policy", policy).stdout
             for policy in ("lru", "frequency")}
    assert texts["lru"] == texts["frequency"]
    result = run_cli(store, *ARGS, "--backend", backend, "--cache-policy", "often", check=False)
    assert result.returncode == 2 and "often" in result.stderr
