"""bench/cuda_timeline.py: a CUPTI trace (bench/cuda_timeline.cpp's tab-separated records) cut into
steps at the token selection, with each step's wall, device busy time, idle gaps and what the host
did in them, and what happens between one step's token and the next step's first kernel.
Malformed traces are refused with the file and line, never a traceback."""
import json
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
TOOL = REPO / "bench" / "cuda_timeline.py"


class Trace:
    def __init__(self):
        self.lines = ["# kind\tstart_ns\tend_ns\tstream_or_thread\tcorrelation\tgraph\tbytes\tdetail\tname"]

    def kernel(self, start, end, name, graph=0):
        self.lines.append(f"K\t{start}\t{end}\t7\t1\t{graph}\t0\t0\t{name}")

    def api(self, start, end, name):
        self.lines.append(f"A\t{start}\t{end}\t42\t1\t0\t0\t0\t{name}")

    def copy(self, start, end, nbytes, kind):
        self.lines.append(f"C\t{start}\t{end}\t7\t1\t0\t{nbytes}\t{kind}\t")

    def sync(self, start, end, kind=3):
        self.lines.append(f"Y\t{start}\t{end}\t7\t1\t0\t0\t{kind}\t")

    def write(self, path):
        path.write_text("\n".join(self.lines) + "\n")


def run(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def engine_like(path):
    """A prefill call of 40 kernels, then 10 decode steps of one graph each (µs: 4 of host
    turnaround, 5 kernels of 8 with gaps of 2, the selection, the token's copy back)."""
    t = Trace()
    now = 1_000_000
    for _ in range(40):
        t.kernel(now, now + 50_000, "void cherenkov::engine::cuda::(anonymous namespace)::gemm_kernel<4>(Params)")
        t.api(now + 50_000, now + 52_000, "cudaLaunchKernel_v7000")
        now += 60_000
    t.kernel(now, now + 5_000, "cherenkov::engine::cuda::(anonymous namespace)::greedy_kernel(float const*)")
    now += 5_000
    for _ in range(10):
        t.copy(now, now + 1_000, 4, 2)
        t.sync(now, now + 1_500)
        t.api(now + 1_500, now + 2_500, "cudaMemcpyAsync_v3020")
        t.api(now + 2_500, now + 3_500, "cudaGraphLaunch_v10000")
        now += 4_000
        for i in range(5):
            t.kernel(now, now + 8_000, f"void k{i}(int)", graph=3)
            now += 10_000
        t.kernel(now, now + 2_000, "cherenkov::engine::cuda::(anonymous namespace)::greedy_kernel(float const*)", graph=3)
        now += 2_000
    t.write(path)


def test_steps_gaps_and_the_step_start(tmp_path):
    trace, out = tmp_path / "t.tsv", tmp_path / "t.json"
    engine_like(trace)
    r = run(trace, "--json", out, "--skip", "0")
    assert r.returncode == 0, r.stderr
    assert "1 long calls, 10 decode steps kept" in r.stdout
    figures = json.loads(out.read_text())
    (prefill,) = figures["long_calls"]
    assert prefill["kernels"] == 41
    assert abs(prefill["kernel_us"] - 2005.0) < 1e-6
    assert abs(prefill["busy_us"] - 2005.0) < 1e-6
    # 39 gaps of 10 µs between the GEMMs, named by the kernels' short names and the host's call
    top = prefill["gap_table"][0]
    assert (top["after"], top["before"], top["host"]) == ("gemm_kernel", "gemm_kernel", "cudaLaunchKernel")
    assert abs(top["us_per_step"] - 390.0) < 1e-6
    decode = figures["decode"]
    assert decode["steps"] == 10
    assert abs(decode["wall_us"] - 56.0) < 1e-6          # 4 + 5·10 + 2
    assert abs(decode["busy_us"] - 43.0) < 1e-6          # copy 1 + 5·8 + 2
    assert decode["kernels"] == 6 and decode["graph_kernels"] == 6
    assert decode["copies"]["D2H"]["count"] == 1
    assert abs(decode["blocked_us"] - 1.5) < 1e-6
    turn = decode["turnaround"]
    assert abs(turn["(wall: previous token selection to first kernel)"]["us"] - 4.0) < 1e-6
    assert turn["cudaGraphLaunch"]["count"] == 1
    assert abs(decode["launch_latency_us"] - 0.5) < 1e-6
    assert "a step's start" in r.stdout


def test_malformed_traces_are_refused_with_file_and_line(tmp_path):
    good = "K\t10\t20\t7\t1\t0\t0\t0\tgreedy_kernel"
    cases = {
        "fields": "K\t10\t20\t7",
        "integer": "K\t10\tlate\t7\t1\t0\t0\t0\tgreedy_kernel",
        "kind": "Z\t10\t20\t7\t1\t0\t0\t0\tx",
        "order": "K\t30\t20\t7\t1\t0\t0\t0\tgreedy_kernel",
    }
    for name, bad in cases.items():
        path = tmp_path / f"{name}.tsv"
        path.write_text(f"{good}\n{bad}\n")
        r = run(path)
        assert r.returncode != 0, name
        assert f"{path}:2:" in r.stderr, (name, r.stderr)
        assert "Traceback" not in r.stderr
    empty = tmp_path / "empty.tsv"
    empty.write_text("# nothing\n")
    r = run(empty)
    assert r.returncode != 0 and "no kernel records" in r.stderr
    r = run(tmp_path / "missing.tsv")
    assert r.returncode != 0 and "cannot read" in r.stderr and "Traceback" not in r.stderr
    path = tmp_path / "nosplit.tsv"
    path.write_text("K\t10\t20\t7\t1\t0\t0\t0\tgemm\n")
    r = run(path)
    assert r.returncode != 0 and "--split" in r.stderr


def test_random_traces_never_crash(tmp_path):
    """Fuzzing: mutated engine-like traces give figures or a refusal, never a traceback."""
    base = tmp_path / "base.tsv"
    engine_like(base)
    lines = base.read_text().splitlines()
    rng = random.Random(34)
    for i in range(40):
        mutated = list(lines)
        for _ in range(rng.randint(1, 6)):
            j = rng.randrange(len(mutated))
            fields = mutated[j].split("\t")
            choice = rng.random()
            if choice < 0.3:
                fields[rng.randrange(len(fields))] = rng.choice(["", "-1", "x", "99999999999999", "\u00e9"])
            elif choice < 0.5:
                fields = fields[: rng.randrange(len(fields))]
            elif choice < 0.7:
                mutated.insert(j, mutated[j])
                continue
            else:
                del mutated[j]
                continue
            mutated[j] = "\t".join(fields)
        path = tmp_path / f"m{i}.tsv"
        path.write_text("\n".join(mutated) + "\n")
        r = run(path)
        assert "Traceback" not in r.stderr, r.stderr
