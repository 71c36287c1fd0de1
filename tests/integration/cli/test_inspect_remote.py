"""`cherenkov inspect http://...`: a remote checkpoint is described from range requests
alone. A local server on 127.0.0.1 serves a tiny checkpoint and counts the bytes it sends."""
import http.server
import json
import re
import threading
from pathlib import Path

import pytest


class RangeHandler(http.server.BaseHTTPRequestHandler):
    root = None
    honour_range = True
    bytes_sent = 0
    token = None
    lock = threading.Lock()

    def log_message(self, *args):
        pass

    def do_GET(self):
        if self.token and self.headers.get("Authorization") != f"Bearer {self.token}":
            self.send_error(401)
            return
        if self.path.startswith("/redirect/"):
            self.send_response(302)
            self.send_header("Location", "/" + self.path[len("/redirect/"):])
            self.end_headers()
            return
        path = Path(self.root) / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        match = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if match and self.honour_range:
            first, last = int(match.group(1)), min(int(match.group(2)), len(data) - 1)
            body = data[first:last + 1]
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{len(data)}")
        else:
            body = data
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        with RangeHandler.lock:
            RangeHandler.bytes_sent += len(body)


@pytest.fixture
def server(make_tiny_checkpoint):
    checkpoint = make_tiny_checkpoint("--shards", "2", "--mtp")
    handler = type("Handler", (RangeHandler,), {"root": str(checkpoint), "bytes_sent": 0})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield checkpoint, handler, f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_remote_inspection_reads_only_headers(run_cli, server):
    checkpoint, handler, base = server
    remote = json.loads(run_cli("inspect", base + "/", "--json").stdout)
    local = json.loads(run_cli("inspect", checkpoint, "--json").stdout)
    strip = lambda report: [(t["name"], t["dtype"], t["shape"], t["offset"], t["end"]) for t in report["tensors"]]
    assert strip(remote) == strip(local)
    assert remote["qwen4_exp"]["config"] == local["qwen4_exp"]["config"]
    weights = sum(p.stat().st_size for p in checkpoint.glob("*.safetensors"))
    assert handler.bytes_sent < weights / 10, (handler.bytes_sent, weights)


def test_remote_follows_redirects(run_cli, server):
    _, _, base = server
    report = json.loads(run_cli("inspect", base + "/redirect", "--json").stdout)
    assert report["qwen4_exp"] is not None


def test_server_that_ignores_range_is_rejected(run_cli, server):
    _, handler, base = server
    handler.honour_range = False
    result = run_cli("inspect", base, check=False)
    assert result.returncode == 1
    assert "ignores HTTP range requests" in result.stderr


def test_auth_required_and_token_never_printed(run_cli, server):
    _, handler, base = server
    handler.token = "secret-token-123"
    result = run_cli("inspect", base, check=False)
    assert result.returncode == 1 and "401" in result.stderr
    result = run_cli("inspect", base, "--hf-token", "wrong-token-456", check=False)
    assert result.returncode == 1 and "wrong-token-456" not in result.stderr
    report = json.loads(run_cli("inspect", base, "--json", "--hf-token", "secret-token-123").stdout)
    assert report["qwen4_exp"] is not None
    assert "secret-token-123" not in json.dumps(report)
