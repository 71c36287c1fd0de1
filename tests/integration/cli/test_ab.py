"""bench/ab.py: variants interleaved round by round in a rotating order, each run's first repeat
left out, ranges and median ratios against the first variant, failures named with their stderr
(and exit 1); and one real A/B of the built binary on the bundled model."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
AB = REPO / "bench" / "ab.py"

# A stand-in for `cherenkov bench --json`: logs its arguments, then reports three repeats whose
# rates come from --fake-rate (prefill) and --fake-rate / 10 (decode); the first repeat is 1.0,
# which ab.py must leave out. --fake-fail makes it fail the way the binary does.
FAKE = """\
import json, sys
args = sys.argv[1:]
with open(LOG, "a") as f:
    f.write(" ".join(args) + "\\n")
if "--fake-fail" in args:
    sys.stderr.write("loading\\nerror: [bench] the pool does not fit\\n")
    sys.exit(3)
rate = float(args[args.index("--fake-rate") + 1])
runs = [{"prefill_tokens_per_second": 1.0, "decode_tokens_per_second": 1.0}]
runs += [{"prefill_tokens_per_second": rate + i, "decode_tokens_per_second": rate / 10 + i}
         for i in range(2)]
print(json.dumps({"runs": runs}))
"""


def fake_binary(tmp_path):
    log = tmp_path / "calls.log"
    script = tmp_path / "fake_cherenkov"
    script.write_text(f"#!{sys.executable}\nLOG = {str(log)!r}\n" + FAKE)
    script.chmod(0o755)
    return script, log


def run_ab(*args):
    return subprocess.run([sys.executable, str(AB), *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def rows(text):
    out = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| regime"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            out[(cells[0], cells[1])] = cells[2:]
    return out


def test_variants_interleave_and_compare_to_the_first(tmp_path):
    binary, log = fake_binary(tmp_path)
    out = tmp_path / "ab.json"
    result = run_ab("STORE", "--variant", f"before={binary},--fake-rate,100",
                    "--variant", f"after={binary},--fake-rate,150",
                    "--regime", "short=--prompt-tokens 8", "--regime", "long=--prompt-tokens 64",
                    "--rounds", "2", "--json", out)
    assert result.returncode == 0, result.stderr
    calls = log.read_text().splitlines()
    # Round 1: before then after for each regime; round 2 the other way round.
    assert [c.split()[-1] for c in calls] == ["100", "150", "100", "150",
                                              "150", "100", "150", "100"]
    assert calls[0] == "bench STORE --json --prompt-tokens 8 --fake-rate 100"
    table = rows(result.stdout)
    # Two counted repeats a run (the first, 1.0, is left out), two rounds.
    assert table[("short", "prefill")] == ["100.0-101.0", "150.0-151.0", "1.498"]  # 150.5 / 100.5
    assert table[("long", "decode")] == ["10.0-11.0", "15.0-16.0", "1.476"]  # 15.5 / 10.5
    saved = json.loads(out.read_text())
    assert saved["rates"]["short"]["after"]["prefill"] == [150.0, 151.0, 150.0, 151.0]
    assert saved["failures"] == []


def test_a_failed_run_is_named_and_fails_the_script(tmp_path):
    binary, _ = fake_binary(tmp_path)
    result = run_ab("STORE", "--variant", f"base={binary},--fake-rate,100",
                    "--variant", f"broken={binary},--fake-fail", "--regime", "r=--repeat 3",
                    "--rounds", "1")
    assert result.returncode == 1
    assert "failed: r broken (round 1): exit 3: error: [bench] the pool does not fit" in result.stdout
    assert rows(result.stdout)[("r", "prefill")] == ["100.0-101.0", "-", "-"]


def test_bad_arguments_are_usage_errors(tmp_path):
    result = run_ab("STORE", "--variant", "nameless", "--regime", "r=--repeat 1")
    assert result.returncode == 2
    assert "--variant 'nameless': expected NAME=VALUE" in result.stderr
    result = run_ab("STORE", "--variant", "a=x", "--variant", "a=y", "--regime", "r=--repeat 1")
    assert result.returncode == 2
    assert "names must be unique" in result.stderr


def test_the_built_binary_against_itself_on_the_bundled_model(cherenkov_bin, store):
    result = run_ab(store, "--variant", f"plain={cherenkov_bin}",
                    "--variant", f"tuned={cherenkov_bin},--tuning,cpu_avx512=off",
                    "--regime", "tiny=--backend cpu --prompt-tokens 8 --gen-tokens 4 --repeat 2",
                    "--rounds", "1")
    assert result.returncode == 0, result.stdout + result.stderr
    table = rows(result.stdout)
    for metric in ("prefill", "decode"):
        plain, tuned, ratio = table[("tiny", metric)]
        assert float(plain.replace(",", "")) > 0 and float(tuned.replace(",", "")) > 0
        assert float(ratio) > 0
