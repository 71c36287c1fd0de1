"""Monitoring of `cherenkov serve` on the bundled model (models/tiny-python): status and stats
through the CLI while a request streams, paging to the end, the control socket's permissions,
another user refused, a stale socket cleaned after kill -9, a second server on one socket
refused, and GET /metrics parsed by Prometheus' own text parser."""
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time

import pytest

import serve_harness
from serve_harness import Server



@pytest.fixture(scope="module")
def server(cherenkov_bin, store):
    # --no-eos: a request runs to max_tokens, long enough to be seen running.
    s = Server(cherenkov_bin, store, "--no-eos", "--pool-gb", "0.05")
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


def cli(cherenkov_bin, *args, env=None, user=None):
    command = [cherenkov_bin, *map(str, args)]
    if user is not None:
        command = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)


def cli_json(cherenkov_bin, *args):
    result = cli(cherenkov_bin, *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def stream_in_background(server, max_tokens):
    """Starts a streaming completion in a thread; returns (thread, list of received events)."""
    events = []

    def run():
        body = {"model": "cherenkov", "prompt": "def fibonacci(n):", "max_tokens": max_tokens,
                "stream": True}
        for event in server.stream("/v1/completions", body):
            events.append(event)
    thread = threading.Thread(target=run)
    thread.start()
    return thread, events


def test_status_and_stats_while_a_request_streams(cherenkov_bin, server):
    thread, events = stream_in_background(server, 3000)
    try:
        running = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and thread.is_alive():
            status = cli_json(cherenkov_bin, "status", "--socket", server.socket)
            if status["requests"]["running"]:
                running = status
                break
            time.sleep(0.1)
        assert running is not None, "status never showed the streaming request"
        assert running["ready"] is True and running["state"] == "ready"
        request = running["requests"]["running"][0]
        assert request["phase"] in ("prefill", "decode")
        assert running["requests"]["current"] == request["id"]
        assert running["memory"]["rss_bytes"] > 0
        summary = cli_json(cherenkov_bin, "stats", "summary", "--socket", server.socket)
        assert summary["totals"]["selections"] > 0
        assert isinstance(summary["totals"]["hits"], int)
        assert summary["prefill"]["chunks"] >= 1
        assert summary["prefill"]["tokens"] >= 1
        assert summary["phases"]["gpu_timing"]["status"]
        # Text: Markdown when redirected.
        text = cli(cherenkov_bin, "stats", "summary", "--socket", server.socket)
        assert text.returncode == 0, text.stderr
        assert text.stdout.startswith("# cherenkov stats\n")
        assert "| layers |" in text.stdout and "\x1b[" not in text.stdout
        status_text = cli(cherenkov_bin, "status", "--socket", server.socket)
        assert status_text.stdout.startswith("# cherenkov status\n")
        assert "- state: ready" in status_text.stdout
    finally:
        thread.join(timeout=300)  # 3,000 tokens: minutes on a slow (e.g. instrumented) build
    assert events and events[-1] == "[DONE]"
    # Counters accumulate: a later summary counts the finished request.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        summary = cli_json(cherenkov_bin, "stats", "summary", "--socket", server.socket)
        if summary["requests"]["by_outcome"]["length"] >= 1:
            break
        time.sleep(0.2)
    assert summary["requests"]["by_outcome"]["length"] >= 1
    assert summary["requests"]["generated_tokens"] >= 3000
    # GPU stage coverage: measured on CUDA (every decode step a window), not applicable on the CPU.
    phases = summary["phases"]
    if serve_harness.BACKEND == "cuda":
        assert phases["gpu_timing"]["status"] == "ok"
        assert phases["gpu_windows"] > 100 and phases["invalid_gpu_windows"] == 0
        assert 0.0 < phases["gpu_stage_fraction"] <= 1.0
    else:
        assert phases["gpu_timing"]["status"].startswith("not applicable")
        assert phases["gpu_stage_fraction"] is None


def test_paging_layers_and_experts_to_the_end(cherenkov_bin, server):
    server.post("/v1/completions", {"model": "cherenkov", "prompt": "import os", "max_tokens": 8})
    # Wait for the idle observation after the request: two summaries a second apart that agree
    # (the pages below must come from the same counters; a slow machine observes late).
    summary, deadline = None, time.monotonic() + 30
    while time.monotonic() < deadline:
        time.sleep(1.2)
        latest = cli_json(cherenkov_bin, "stats", "summary", "--socket", server.socket)
        if summary is not None and latest["totals"] == summary["totals"]:
            break
        summary = latest
    n_layers, n_experts = summary["n_layers"], summary["n_experts"]
    layers, offset = [], 0
    while offset is not None:
        page = cli_json(cherenkov_bin, "stats", "layers", "--offset", offset, "--limit", 1,
                        "--socket", server.socket)
        assert page["observed_at"] > 0
        assert len(page["layers"]) == 1
        layers += page["layers"]
        offset = page["next_offset"]
    assert [entry["layer"] for entry in layers] == list(range(n_layers))
    assert {q["bits"] for q in layers[0]["quant"]} == {4, 3, 2}
    assert sum(entry["selections"] for entry in layers) == summary["totals"]["selections"]
    experts, offset = [], 0
    while offset is not None:
        page = cli_json(cherenkov_bin, "stats", "experts", 0, "--offset", offset, "--limit", 5,
                        "--socket", server.socket)
        experts += page["experts"]
        offset = page["next_offset"]
    assert [entry["expert"] for entry in experts] == list(range(n_experts))
    assert sum(entry["selections"] for entry in experts) == layers[0]["selections"]
    text = cli(cherenkov_bin, "stats", "layers", "--limit", 2, "--socket", server.socket)
    assert text.returncode == 0 and "| layer |" in text.stdout and "- next_offset: 2" in text.stdout
    # Usage errors exit 2; a layer out of range is the server's refusal, exit 1.
    assert cli(cherenkov_bin, "stats", "layers", "--limit", 0, "--socket", server.socket).returncode == 2
    assert cli(cherenkov_bin, "stats", "layers", "--limit", 129, "--socket", server.socket).returncode == 2
    bad = cli(cherenkov_bin, "stats", "experts", n_layers, "--socket", server.socket)
    assert bad.returncode == 1 and "out of range" in bad.stderr


def test_socket_is_private(server):
    socket_mode = os.lstat(server.socket).st_mode
    assert stat.S_ISSOCK(socket_mode) and stat.S_IMODE(socket_mode) == 0o600
    directory = os.lstat(os.path.dirname(server.socket))
    assert stat.S_IMODE(directory.st_mode) == 0o700 and directory.st_uid == os.geteuid()


def test_another_user_is_refused(cherenkov_bin, server):
    if os.geteuid() != 0:
        pytest.skip("running a client as another user needs root (setpriv)")
    result = cli(cherenkov_bin, "status", "--socket", server.socket, user=65534)
    assert result.returncode == 1
    assert "Permission denied" in result.stderr or "not by this user" in result.stderr


def test_a_server_of_another_user_is_refused(cherenkov_bin, store):
    """The client checks the socket's directory and the server's UID: root does not talk to a
    server run by nobody."""
    if os.geteuid() != 0:
        pytest.skip("running a server as another user needs root (setpriv)")
    base = tempfile.mkdtemp(prefix="cherenkov-nobody-")
    try:
        shutil.copytree(store, os.path.join(base, "store"))
        for root, dirs, files in os.walk(base):
            for name in [root] + [os.path.join(root, n) for n in dirs + files]:
                os.chown(name, 65534, 65534)
        socket_path = os.path.join(base, "ctl", "control.sock")
        env = {**os.environ, "XDG_DATA_HOME": base, "XDG_CACHE_HOME": base, "XDG_CONFIG_HOME": base, "HF_HOME": base,
               "HOME": base}
        proc = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                 cherenkov_bin, "serve", os.path.join(base, "store"), "--port", "0",
                                 "--socket", socket_path, "--backend", "cpu"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try:
            line = proc.stdout.readline()  # the ready line, or EOF when it failed
            if "serving" not in line:
                proc.kill()
                pytest.skip(f"a server as nobody did not start here: {proc.communicate()[1][-300:]}")
            result = cli(cherenkov_bin, "status", "--socket", socket_path)
            assert result.returncode == 1
            assert "not by this user" in result.stderr
        finally:
            proc.kill()
            proc.communicate()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_stale_socket_is_cleaned_after_kill_9(cherenkov_bin, store, tmp_path):
    socket_path = str(tmp_path / "ctl" / "control.sock")
    first = Server(cherenkov_bin, store, "--socket", socket_path)
    try:
        assert cli_json(cherenkov_bin, "status", "--socket", socket_path)["ready"] is True
        first.proc.send_signal(signal.SIGKILL)
        first.proc.wait()
    finally:
        first.close()
    assert stat.S_ISSOCK(os.lstat(socket_path).st_mode)  # left behind
    stale = cli(cherenkov_bin, "status", "--socket", socket_path)
    assert stale.returncode == 1 and "no server is answering" in stale.stderr
    second = Server(cherenkov_bin, store, "--socket", socket_path)
    try:
        assert cli_json(cherenkov_bin, "status", "--socket", socket_path)["pid"] == second.pid()
    finally:
        assert second.stop() == 0
        second.close()
    assert not os.path.exists(socket_path)  # removed on a clean stop


def test_a_second_server_on_one_socket_is_refused(cherenkov_bin, store, server):
    result = subprocess.run([cherenkov_bin, "serve", str(store), "--port", "0", "--backend", "cpu",
                             "--socket", server.socket], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "another server owns the control socket" in result.stderr
    assert cli_json(cherenkov_bin, "status", "--socket", server.socket)["pid"] == server.pid()


def test_no_server_is_an_error(cherenkov_bin, tmp_path):
    os.chmod(tmp_path, 0o700)
    result = cli(cherenkov_bin, "status", "--socket", str(tmp_path / "control.sock"))
    assert result.returncode == 1 and "no server is answering" in result.stderr


def test_metrics_parse_as_prometheus_text(server):
    prometheus = pytest.importorskip("prometheus_client.parser")
    server.post("/v1/completions", {"model": "cherenkov", "prompt": "class A:", "max_tokens": 4})
    status, headers, body = server.request("GET", "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    families = {family.name: family for family in prometheus.text_string_to_metric_families(body)}
    # prometheus_client drops the _total suffix from counter family names.
    for name in ("cherenkov_expert_hits", "cherenkov_expert_misses", "cherenkov_expert_read_bytes",
                 "cherenkov_requests", "cherenkov_prompt_tokens", "cherenkov_cached_prompt_tokens",
                 "cherenkov_generated_tokens"):
        assert families[name].type == "counter", name
    for name in ("cherenkov_memory_bytes", "cherenkov_prefix_cache_bytes",
                 "cherenkov_prefix_cache_entries", "cherenkov_sessions", "cherenkov_requests_running",
                 "cherenkov_requests_queued", "cherenkov_ready"):
        assert families[name].type == "gauge", name
    for name in ("cherenkov_time_to_first_token_seconds", "cherenkov_decode_tokens_per_second"):
        assert families[name].type == "histogram", name
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in families.values() for s in family.samples}
    assert samples[("cherenkov_ready", ())] == 1
    assert samples[("cherenkov_memory_bytes", (("kind", "rss"),))] > 0
    assert samples[("cherenkov_requests_total", (("outcome", "length"),))] >= 1
    assert samples[("cherenkov_expert_hits_total", ())] + samples[("cherenkov_expert_misses_total", ())] > 0
    assert samples[("cherenkov_time_to_first_token_seconds_count", ())] >= 1


# ---- dash, driven in tmux ----

def _tmux(*args):
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=30)


def _screen(session):
    return _tmux("capture-pane", "-p", "-t", session).stdout


def _wait_for(session, predicate, timeout=30):
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = _screen(session)
        if predicate(text):
            return text
        time.sleep(0.2)
    raise AssertionError(f"dash screen never matched; last screen:\n{text}")


def test_dash_in_tmux(cherenkov_bin, store, tmp_path):
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    socket_path = str(tmp_path / "ctl" / "control.sock")
    server = Server(cherenkov_bin, store, "--no-eos", "--pool-gb", "0.05", "--socket", socket_path)
    session = f"cherenkov-dash-{os.getpid()}"
    try:
        started = _tmux("new-session", "-d", "-s", session, "-x", "80", "-y", "20",
                        f"{cherenkov_bin} dash --socket {socket_path}; echo DASH-EXIT=$?; sleep 30")
        assert started.returncode == 0, started.stderr
        _tmux("resize-window", "-t", session, "-x", "80", "-y", "20")
        # A small terminal shows the focused pane only; Tab reaches the next.
        _wait_for(session, lambda s: "cherenkov dash  live" in s and "Overview (Tab" in s)
        _tmux("send-keys", "-t", session, "Tab")
        _wait_for(session, lambda s: "Layers (Tab" in s and "layer  selections" in s)
        _tmux("send-keys", "-t", session, "BTab")
        resized = _tmux("resize-window", "-t", session, "-x", "140", "-y", "50")
        assert resized.returncode == 0, resized.stderr
        size = _tmux("display", "-p", "-t", session, "#{window_width}x#{window_height}").stdout
        assert size.strip() == "140x50", size
        # Full size: the three panes and a live header.
        _wait_for(session, lambda s: "cherenkov dash  live" in s and "Overview" in s
                  and "Layers" in s and "Detail" in s)
        # It follows a streaming request: the header counts it running, the layer table fills.
        thread, events = stream_in_background(server, 3000)
        try:
            _wait_for(session, lambda s: "requests 1 running" in s)
        finally:
            thread.join(timeout=120)
        _wait_for(session, lambda s: "requests 0 running" in s)
        screen = _screen(session)
        assert "layer  selections" in screen and "read MB/s" in screen
        # Tab moves the focus; Down selects the next layer, shown in the detail pane.
        _tmux("send-keys", "-t", session, "Down")
        _wait_for(session, lambda s: "layer 1  batches" in s)
        _tmux("send-keys", "-t", session, "Tab")
        # The server goes away: values stay, marked stale; a new server makes it live again.
        assert server.stop() == 0
        server.close()
        _wait_for(session, lambda s: "STALE since" in s)
        server = Server(cherenkov_bin, store, "--no-eos", "--pool-gb", "0.05", "--socket", socket_path)
        _wait_for(session, lambda s: "cherenkov dash  live" in s)
        # q quits with status 0 and gives the terminal back.
        _tmux("send-keys", "-t", session, "q")
        after = _wait_for(session, lambda s: "DASH-EXIT=" in s)
        assert "DASH-EXIT=0" in after
        assert "cherenkov dash  live" not in after  # the alternate screen is gone
    finally:
        _tmux("kill-session", "-t", session)
        server.kill()
        if os.path.exists(server.stderr_path):
            server.close()
