"""scripts/bench-suite (issue 33, docs/benchmarks.md) on the bundled models/tiny-python, on the CPU,
with tiny custom suites so that every run takes seconds: the dry run, a real light run end to
end (report, summary, gallery, answers, archive), placeholders instead of local names, the
gallery in headless Chromium, SVG checks, the loop check, resume after a kill, refused and
cap-raising resumes, summarize/readme, and the paired prefill comparison.

Some runs use a scripted binary (a Python script standing in for cherenkov's generation, handing
every other command to the real binary) to produce what the tiny model cannot on demand: a
looping answer, valid and broken SVGs, and a memory figure above the machine's."""
import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

MODEL = REPO / "models" / "tiny-python"
RUNNER = REPO / "scripts" / "bench-suite"
ALIAS = "tiny-bench"

# A raw prompt the Q4 model ends (EOS) after a few tokens and the Q2 model loops on.
ENDING_PROMPT = 'import sys\n\n\ndef main():\n    return 0\n\n\nif __name__ == "__main__":\n    sys.exit('


def tiny_suite(path, **overrides):
    suite = {
        "format": "cherenkov-bench-suite", "version": 1, "context": 1024, "drafts": 2, "rounds": 2,
        "cycle_check_seconds": 0.5, "power_check_seconds": 5, "sample_timeout_seconds": 120,
        "args": ["--threads", "2"],
        "configs": [{"name": "4bit", "label": "4-bit", "experts": 4},
                    {"name": "2bit", "label": "2-bit", "experts": 2}],
        "cases": [
            {"name": "code", "title": "Code", "cap": 24, "prompt": ENDING_PROMPT, "raw": True},
            {"name": "prose", "title": "Prose", "cap": 16, "prompt": "Write a Python function is_prime(n)."},
            {"name": "long-prefill", "title": "Long prefill", "cap": 8, "rounds": 1, "raw": True,
             "prompt": "{document}\n# What does this module do?",
             "document_file": str(MODEL / "heldout_sample.txt"), "document_chars": 1500},
            {"name": "pelican", "kind": "pelican", "cap": 32, "prompt": "Generate an SVG of a pelican riding a bicycle."},
        ],
        "light": {"cases": ["code", "prose", "long-prefill"], "rounds": 1},
    }
    if "cases" in overrides:
        del suite["light"]  # it names the default cases
    suite.update(overrides)
    path.write_text(json.dumps(suite))
    return path


FAKE_BINARY = r'''#!PYTHON
"""Scripted stand-in for cherenkov's generation; every other command goes to the real binary."""
import json, os, sys, time
real = os.environ["BENCH_FAKE_REAL_BIN"]
args = sys.argv[1:]
if args and args[0] in ("inspect", "model", "paths", "prompt", "tokenize", "detokenize"):
    os.execv(real, [real, *args])
prompt = args[1]
out = sys.stdout
if "SCRIPT-LOOP" in prompt:
    out.write("Let me think about this.\n")
    block = " ".join(f"step{i}" for i in range(40))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        out.write(block + "\n")
        out.flush()
        time.sleep(0.01)
    sys.exit(0)
if "SCRIPT-PELICAN-OK" in prompt:
    out.write('Here it is:\n```svg\n<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 200 160">'
              '<circle cx="60" cy="120" r="28" fill="none" stroke="black" stroke-width="4"/>'
              '<circle cx="150" cy="120" r="28" fill="none" stroke="black" stroke-width="4"/>'
              '<path d="M60 120 L100 80 L150 120" stroke="gray" stroke-width="4" fill="none"/>'
              '<ellipse cx="105" cy="60" rx="35" ry="20" fill="white" stroke="black"/>'
              '<path d="M135 50 L185 58 L135 64 Z" fill="orange"/></svg>\n```\n')
elif "SCRIPT-PELICAN-BAD" in prompt:
    out.write('<svg xmlns="http://www.w3.org/2000/svg"><circle r="5"><rect width="3"></svg>\n')
else:
    out.write("A scripted answer.\n")
out.flush()
rss = 10**15 if "SCRIPT-HUGE" in prompt and os.environ.get("BENCH_FAKE_MEMORY") != "normal" else 40_000_000
err = sys.stderr
err.write("load: 0.050 s\n")
err.write("prefill: 12 tokens in 0.100 s (120.00 tok/s), 1 chunk(s) of up to 256\n")
err.write("decode: 9 tokens in 0.090 s (100.00 tok/s), 5 steps, stop: eos\n")
err.write("mtp: draft 1 accepted 4/5, draft 2 accepted 2/4\n")
stats = {"backend": "cpu", "rss_bytes": rss, "peak_rss_bytes": rss, "dense_bytes": 1, "state_bytes": 1}
if "SCRIPT-CUDA" in prompt:  # the CUDA backend's figures (CudaModel::backend_stats)
    stats.update(backend="cuda", device={"device": "NVIDIA H100 80GB HBM3", "device_total_bytes": 80_000_000_000,
                                         "device_free_bytes": 30_000_000_000, "device_scratch_bytes": 2_000_000_000,
                                         "device_expert_pool_bytes": 40_000_000_000})
err.write("memory_stats " + json.dumps(stats) + "\n")
err.write("backend: " + stats["backend"] + "\n")
'''


@pytest.fixture(scope="module")
def model(run_cli):
    """The tiny model in the session's temporary index, with Q4 and Q2 expert tables."""
    run_cli("prepare", MODEL, "--name", ALIAS, "--experts", "4,2")
    return ALIAS


@pytest.fixture(scope="module")
def fake_binary(tmp_path_factory, cherenkov_bin):
    path = tmp_path_factory.mktemp("fake") / "cherenkov"
    path.write_text(FAKE_BINARY.replace("PYTHON", sys.executable))
    path.chmod(0o755)
    os.environ["BENCH_FAKE_REAL_BIN"] = cherenkov_bin
    return path


def bench(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, str(RUNNER), *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def report_of(directory):
    return json.loads((Path(directory) / "report.json").read_text())


@pytest.fixture(scope="module")
def light_run(model, cherenkov_bin, tmp_path_factory):
    base = tmp_path_factory.mktemp("light")
    suite = tiny_suite(base / "suite.json")
    out = base / "results" / "light"
    result = bench(model, "--binary", cherenkov_bin, "--suite", suite, "--mode", "light", "--output", out,
                   "--note", "CI, 2 cores, idle")
    assert result.returncode == 0, result.stderr
    return {"dir": out, "suite": suite, "result": result}


@pytest.fixture(scope="module")
def scripted_run(model, fake_binary, tmp_path_factory):
    """A run with the scripted binary: a looping answer, a plain one after it, a valid and a
    broken pelican."""
    base = tmp_path_factory.mktemp("scripted")
    suite = tiny_suite(base / "suite.json", rounds=1, configs=[{"name": "4bit", "label": "4-bit", "experts": 4}], cases=[
        {"name": "loop", "cap": 900, "prompt": "SCRIPT-LOOP please", "raw": True},
        {"name": "after", "cap": 64, "prompt": "plain question", "raw": True},
        {"name": "device", "cap": 64, "prompt": "SCRIPT-CUDA question", "raw": True},
        {"name": "pelican", "kind": "pelican", "cap": 64, "prompt": "SCRIPT-PELICAN-OK", "raw": True},
        {"name": "pelican-broken", "kind": "pelican", "cap": 64, "prompt": "SCRIPT-PELICAN-BAD", "raw": True}])
    out = base / "run"
    result = bench(model, "--binary", fake_binary, "--suite", suite, "--output", out)
    assert result.returncode == 0, result.stderr
    return out


def test_dry_run_prints_the_plan_and_writes_nothing(model, cherenkov_bin, tmp_path):
    suite = tiny_suite(tmp_path / "suite.json")
    out = tmp_path / "never"
    result = bench(model, "--binary", cherenkov_bin, "--suite", suite, "--mode", "light", "--dry-run", "--output", out)
    assert result.returncode == 0, result.stderr
    assert "6 samples" in result.stdout
    for sample in ("r1-code-4bit", "r1-code-2bit", "r1-prose-2bit", "r1-long-prefill-4bit"):
        assert sample in result.stdout
    assert "pelican" not in result.stdout.split("prompt long-prefill")[1]
    assert not out.exists()
    full = bench(model, "--binary", cherenkov_bin, "--suite", suite, "--dry-run")
    assert full.returncode == 0, full.stderr
    # 3 workloads x 2 settings x 2 rounds, long-prefill once per setting, pelicans last.
    assert "12 samples" in full.stdout
    assert full.stdout.strip().splitlines()[-1].startswith(" 12. r1-pelican-2bit")
    assert "r2-code-2bit" in full.stdout.split("r2-code-4bit")[0]  # settings rotate between rounds


def test_light_run_end_to_end(light_run):
    out = light_run["dir"]
    report = report_of(out)
    assert report["complete"] and report["selection"]["mode"] == "light"
    ids = [r["id"] for r in report["samples"]]
    assert sorted(ids) == sorted(report["plan"]) and len(ids) == 6
    by_id = {r["id"]: r for r in report["samples"]}
    ok = by_id["r1-code-4bit"]
    assert ok["status"] == "ok" and ok["decode"]["stop"] == "eos"
    assert ok["prefill"]["tok_s"] > 0 and ok["completion_s"] > 0 and ok["answer_tokens"] >= 1
    assert ok["memory"]["figure"] == "rss" and ok["memory"]["figure_bytes"] > 0
    assert by_id["r1-prose-4bit"]["status"] == "capped"
    for record in report["samples"]:
        assert (out / record["answer_file"]).is_file()
        assert record["command"][:3] == ["<binary>", "<model>", f"<prompt:{record['case']}>"]
        assert "--check" not in record["command"]
    assert report["note"] == "CI, 2 cores, idle"
    detail = report["provenance"]["hardware_detail"]
    assert detail["cpu_threads"] >= 1 and detail["memory_bytes"] > 0
    assert detail["model_volume"]["capacity_bytes"] > 0 and detail["expert_read"]["bytes"] > 0
    assert report["provenance"]["model"]["identity"]["model_id"]
    assert len(report["signature"]["binary_sha256"]) == 64
    summary = (out / "summary.md").read_text()
    assert summary.startswith("Hardware: ") and "CPU threads" in summary.splitlines()[0]
    assert "| Code | 4-bit | 1/1 |" in summary
    assert "r1-prose-4bit`: capped at 16 tokens" in summary
    assert (out / "gallery.html").is_file()
    assert Path(str(out) + ".zip").is_file()  # light mode archives


def test_report_uses_placeholders_not_local_names(light_run, cherenkov_bin):
    out = light_run["dir"]
    texts = {name: (out / name).read_text() for name in ("report.json", "summary.md", "gallery.html")}
    texts.update({p.name: p.read_text() for p in (out / "logs").iterdir()})
    local = [str(out), str(light_run["suite"]), cherenkov_bin, os.path.realpath(cherenkov_bin),
             os.environ["XDG_DATA_HOME"], str(REPO)]
    home = os.path.expanduser("~")
    host = socket.gethostname()
    for name, text in texts.items():
        for value in local:
            assert value not in text, f"{name} holds {value}"
        assert home + "/" not in text, f"{name} holds the home directory"
        if len(host) >= 4:
            assert host not in text, f"{name} holds the hostname"
    report = report_of(out)
    assert report["provenance"]["binary"]["path"] == "<binary>"
    assert report["provenance"]["model"]["argument"] == "<model>"
    assert report["provenance"]["suite"]["path"] == "<suite>"


def test_archive_holds_the_whole_run(light_run):
    out = light_run["dir"]
    with zipfile.ZipFile(str(out) + ".zip") as zf:
        names = set(zf.namelist())
        assert {f"light/{n}" for n in ("report.json", "summary.md", "gallery.html")} <= names
        for record in report_of(out)["samples"]:
            assert f"light/{record['answer_file']}" in names
        assert json.loads(zf.read("light/report.json"))["complete"]


def test_loop_check_stops_a_scripted_looping_answer(scripted_run):
    report = report_of(scripted_run)
    by_case = {r["case"]: r for r in report["samples"]}
    loop = by_case["loop"]
    assert loop["status"] == "cycle"
    assert loop["cycle"]["block_words"] == 40 and loop["cycle"]["repeats"] == 4
    assert loop["wall_s"] < 30  # stopped by the check, not by the script's own 60 s limit
    assert "step39" in (scripted_run / loop["answer_file"]).read_text()
    assert by_case["after"]["status"] == "ok"  # the suite went on
    summary = (scripted_run / "summary.md").read_text()
    assert "stopped by the loop check" in summary


def test_cuda_memory_is_the_device_memory_in_use(scripted_run):
    device = next(r for r in report_of(scripted_run)["samples"] if r["case"] == "device")
    assert device["status"] == "ok"
    memory = device["memory"]
    assert memory["figure"] == "device_used" and memory["figure_bytes"] == 50_000_000_000
    assert memory["limit_bytes"] == 80_000_000_000 and memory["device_scratch_bytes"] == 2_000_000_000
    summary = (scripted_run / "summary.md").read_text()
    assert "GPU memory in use after the answer" in summary and "| 50.00 |" in summary


def test_svgs_are_checked_and_invalid_ones_marked(scripted_run):
    report = report_of(scripted_run)
    by_case = {r["case"]: r for r in report["samples"]}
    good, bad = by_case["pelican"], by_case["pelican-broken"]
    assert good["svg"]["status"] == "valid" and good["svg_file"].endswith(".svg")
    assert (scripted_run / good["svg_file"]).read_text().startswith("<svg")
    assert bad["svg"]["status"] == "malformed" and not bad["svg_file"].endswith(".svg")
    gallery = (scripted_run / "gallery.html").read_text()
    assert f'<img src="{good["svg_file"]}"' in gallery
    assert "invalid SVG: malformed" in gallery
    summary = (scripted_run / "summary.md").read_text()
    assert "SVG rate: 1 of 2" in summary


class WebDriver:
    """Just enough of the W3C WebDriver protocol (chromedriver) to load a page headless, take a
    screenshot and read the browser's console log."""

    def __init__(self, chromium, chromedriver):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        self.base = f"http://127.0.0.1:{port}"
        self.proc = subprocess.Popen([chromedriver, f"--port={port}"], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    self.call("GET", "/status")
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            options = {"binary": chromium, "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                                    "--disable-dev-shm-usage", "--window-size=1400,1000"]}
            caps = {"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options,
                                                     "goog:loggingPrefs": {"browser": "ALL"}}}}
            self.session = self.call("POST", "/session", caps)["sessionId"]
        except BaseException:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            raise

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())["value"]

    def open(self, url):
        self.call("POST", f"/session/{self.session}/url", {"url": url})

    def script(self, source):
        return self.call("POST", f"/session/{self.session}/execute/sync", {"script": source, "args": []})

    def screenshot(self):
        return base64.b64decode(self.call("GET", f"/session/{self.session}/screenshot"))

    def console(self):
        return self.call("POST", f"/session/{self.session}/se/log", {"type": "browser"})

    def close(self):
        try:
            self.call("DELETE", f"/session/{self.session}")
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def find_browser():
    import shutil
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("headless Chromium needs Debian's chromium and chromium-driver (scripts/dependencies.txt)")
    return chromium, driver


def test_gallery_renders_in_headless_chromium(scripted_run, light_run, tmp_path):
    chromium, driver_path = find_browser()
    try:
        driver = WebDriver(chromium, driver_path)
    except (OSError, KeyError, urllib.error.URLError) as e:
        pytest.skip(f"Chromium cannot run here: {e}")
    try:
        for directory in (scripted_run, light_run["dir"]):
            driver.open((directory / "gallery.html").resolve().as_uri())
            deadline = time.monotonic() + 20
            while not driver.script("return document.readyState === 'complete' && "
                                    "Array.from(document.images).every(i => i.complete)"):
                assert time.monotonic() < deadline, "the gallery did not finish loading"
                time.sleep(0.1)
            images = driver.script("return Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth])")
            assert all(width > 0 for _, width in images), images
            png = driver.screenshot()
            assert png.startswith(b"\x89PNG") and len(png) > 10_000
            (tmp_path / f"{directory.name}.png").write_bytes(png)
            errors = [e for e in driver.console() if e.get("level") == "SEVERE"]
            assert not errors, errors
        # The scripted gallery shows the valid pelican as an image and marks the broken one.
        driver.open((scripted_run / "gallery.html").resolve().as_uri())
        assert driver.script("return document.images.length") == 1
        assert driver.script("return document.querySelectorAll('.card.invalid').length") == 1
    finally:
        driver.close()


def test_resume_after_a_kill_loses_and_repeats_nothing(model, cherenkov_bin, tmp_path):
    suite = tiny_suite(tmp_path / "suite.json", cases=[
        {"name": "code", "cap": 24, "prompt": ENDING_PROMPT, "raw": True},
        {"name": "prose", "cap": 24, "prompt": "Write a Python function is_prime(n)."}])
    out = tmp_path / "run"
    args = [sys.executable, str(RUNNER), model, "--binary", cherenkov_bin, "--suite", str(suite), "--output", str(out)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 120
    try:
        while True:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline
            try:
                if len(report_of(out)["samples"]) >= 2:
                    break
            except (FileNotFoundError, json.JSONDecodeError):
                pass
            time.sleep(0.02)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = report_of(out)  # still whole: every write is atomic
    done = {r["id"]: r for r in before["samples"]}
    assert 2 <= len(done) < 8
    result = bench(model, "--binary", cherenkov_bin, "--suite", suite, "--output", out, "--resume")
    assert result.returncode == 0, result.stderr
    after = report_of(out)
    ids = [r["id"] for r in after["samples"]]
    assert sorted(ids) == sorted(after["plan"]) and len(ids) == len(set(ids)) == 8
    for record in after["samples"]:
        if record["id"] in done:
            assert record == done[record["id"]], "a finished sample ran again"
    assert after["previous_attempts"] == [] and after["complete"] and len(after["resumes"]) == 1

    # Raising a cap retries only that case's capped samples, keeping the earlier attempts.
    capped = sorted(r["id"] for r in after["samples"] if r["case"] == "prose" and r["status"] == "capped")
    assert capped
    raised = bench(model, "--binary", cherenkov_bin, "--suite", suite, "--output", out, "--resume", "--case-cap", "prose=32")
    assert raised.returncode == 0, raised.stderr
    final = report_of(out)
    assert sorted(r["id"] for r in final["previous_attempts"]) == capped
    assert all(r["cap"] == 32 for r in final["samples"] if r["case"] == "prose")
    assert {r["id"]: r for r in final["samples"]}["r1-code-4bit"] == {r["id"]: r for r in after["samples"]}["r1-code-4bit"]
    assert len(final["signatures"]) == 1
    for attempt in final["previous_attempts"]:
        assert (out / attempt["answer_file"]).is_file() and ".attempt1." in attempt["answer_file"]


def test_mismatched_resume_is_refused(light_run, model, cherenkov_bin, tmp_path):
    out = light_run["dir"]
    original = (out / "report.json").read_bytes()
    base = [model, "--binary", cherenkov_bin, "--suite", light_run["suite"], "--output", out, "--resume"]
    other_cases = bench(*base, "--mode", "light", "--cases", "code")
    assert other_cases.returncode == 1 and "refused" in other_cases.stderr and "selection" in other_cases.stderr
    lower = bench(*base, "--mode", "light", "--case-cap", "code=4")
    assert lower.returncode == 1 and "lower answer caps" in lower.stderr
    changed = tiny_suite(tmp_path / "suite.json", context=1000)
    other_suite = bench(model, "--binary", cherenkov_bin, "--suite", changed, "--output", out, "--resume", "--mode", "light")
    assert other_suite.returncode == 1 and "suite_sha256" in other_suite.stderr
    assert (out / "report.json").read_bytes() == original


def test_memory_failure_stops_the_run_and_is_retried_on_resume(model, fake_binary, tmp_path):
    suite = tiny_suite(tmp_path / "suite.json", rounds=1, configs=[{"name": "4bit", "label": "4-bit", "experts": 4}],
                       cases=[{"name": "first", "cap": 8, "prompt": "plain", "raw": True},
                              {"name": "huge", "cap": 8, "prompt": "SCRIPT-HUGE", "raw": True},
                              {"name": "last", "cap": 8, "prompt": "plain again", "raw": True}])
    out = tmp_path / "run"
    failed = bench(model, "--binary", fake_binary, "--suite", suite, "--output", out)
    assert failed.returncode == 1 and "memory-invalid" in failed.stderr and "--resume" in failed.stderr
    report = report_of(out)
    assert [r["status"] for r in report["samples"]] == ["ok", "memory-invalid"] and not report["complete"]
    env = dict(os.environ, BENCH_FAKE_MEMORY="normal")
    resumed = bench(model, "--binary", fake_binary, "--suite", suite, "--output", out, "--resume", env=env)
    assert resumed.returncode == 0, resumed.stderr
    report = report_of(out)
    assert [r["status"] for r in report["samples"]] == ["ok", "ok", "ok"] and report["complete"]
    assert [r["status"] for r in report["previous_attempts"]] == ["memory-invalid"]


def test_usage_errors_exit_2(model, cherenkov_bin, tmp_path):
    suite = tiny_suite(tmp_path / "suite.json")
    unknown = bench(model, "--binary", cherenkov_bin, "--suite", suite, "--cases", "nope", "--dry-run")
    assert unknown.returncode == 2 and "unknown name 'nope'" in unknown.stderr
    assert bench(model, "--binary", cherenkov_bin, "--suite", suite, "--resume").returncode == 2
    assert bench(model, "--binary", cherenkov_bin, "--suite", suite, "--case-cap", "code", "--dry-run").returncode == 2
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"format": "cherenkov-bench-suite", "version": 1, "configs": [], "cases": [],
                                  "colour": "red"}))
    result = bench(model, "--binary", cherenkov_bin, "--suite", broken, "--dry-run")
    assert result.returncode == 1 and "broken.json: colour: unknown field" in result.stderr


def test_summarize_and_readme_regenerate_without_inference(light_run, tmp_path):
    out = light_run["dir"]
    summary = (out / "summary.md").read_text()
    (out / "summary.md").unlink()
    (out / "README.md").write_text("kept by summarize\n")
    assert bench("summarize", out).returncode == 0
    assert (out / "summary.md").read_text() == summary
    assert (out / "README.md").read_text() == "kept by summarize\n"
    readme = tmp_path / "README.md"
    readme.write_text("# Project\n\nintro\n\n<!-- bench-suite:begin -->\nold\n<!-- bench-suite:end -->\n\ntail\n")
    result = bench("readme", out, "--update", readme)
    assert result.returncode == 0, result.stderr
    text = readme.read_text()
    assert text.startswith("# Project\n\nintro\n\n<!-- bench-suite:begin -->") and text.endswith("\n\ntail\n")
    assert "old" not in text and "| Code | 4-bit |" in text
    assert "# Cherenkov benchmark" in (out / "README.md").read_text()
    assert bench("summarize", tmp_path / "nothing").returncode == 1


def test_paired_prefill_comparison(model, cherenkov_bin, run_cli, tmp_path):
    run_cli("prepare", MODEL, "--name", ALIAS, "--experts", "4,3,2")
    other = tmp_path / "before-cherenkov"
    other.write_bytes(Path(cherenkov_bin).read_bytes())
    other.chmod(0o755)
    out = tmp_path / "prefill"
    result = bench("prefill", "--before", other, "--after", cherenkov_bin, "--model", model, "--out", out,
                   "--rounds", "2", "--lengths", "16,48", "--context", "256")
    assert result.returncode == 0, result.stderr
    report = report_of(out)
    assert len(report["samples"]) == 2 * 2 * 3 * 2
    assert all(r["status"] == "ok" for r in report["samples"])
    firsts = [r["binary"] for r in report["samples"] if r["length"] == 16 and r["config"] == "q4"]
    assert firsts == ["before", "after", "after", "before"]  # the order alternates by round
    assert len(report["output_checks"]) == 4 and all(c["identical"] for c in report["output_checks"])
    assert all(r["decode"]["tokens"] == 7 for r in report["samples"])  # eight generated tokens
    summary = (out / "summary.md").read_text()
    assert summary.startswith("Hardware: ") and "the Q4 outputs are identical" in summary
    assert str(tmp_path) not in (out / "report.json").read_text()


def test_a_separate_index_root_appears_as_a_placeholder(cherenkov_bin, run_cli, tmp_path):
    root = tmp_path / "index-root"
    run_cli("prepare", MODEL, "--name", "tiny-rooted", "--root", root)
    suite = tiny_suite(tmp_path / "suite.json")
    out = tmp_path / "run"
    result = bench("tiny-rooted", "--binary", cherenkov_bin, "--root", root, "--suite", suite, "--output", out,
                   "--cases", "code", "--configs", "4bit", "--rounds", "1")
    assert result.returncode == 0, result.stderr
    report = report_of(out)
    assert report["provenance"]["root"] == "<root>"
    assert report["samples"][0]["command"][-2:] == ["--root", "<root>"]
    assert report["samples"][0]["status"] == "ok"
    assert str(root) not in (out / "report.json").read_text()
