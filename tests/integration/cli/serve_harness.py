"""Starts `cherenkov serve` on a free port and stops it: the process, its URL, raw HTTP helpers
and an SSE reader. Every server a test starts is stopped (SIGTERM, then SIGKILL) when the test
ends, and its exit code is checked where the test cares."""
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

READY = re.compile(r"serving .* at (http://[^/\s]+)/v1")
# The backend the servers (and the CLI runs they are compared with) use: cpu here and in CI;
# CHERENKOV_SERVE_BACKEND=cuda on the GPU machine.
BACKEND = os.environ.get("CHERENKOV_SERVE_BACKEND", "cpu")


class Server:
    def __init__(self, binary, model, *flags, env=None, timeout=120):
        flags = list(map(str, flags))
        # Each server gets its own control socket: servers of one test run side by side, and the
        # default path admits one owner (docs/monitoring.md).
        if "--socket" in flags:
            self.socket = flags[flags.index("--socket") + 1]
        else:
            self.socket = os.path.join(tempfile.mkdtemp(prefix="cherenkov-ctl-"), "control.sock")
            flags += ["--socket", self.socket]
        args = [binary, "serve", str(model), "--port", "0", "--backend", BACKEND, *flags]
        self.stderr_path = f"/tmp/cherenkov-serve-{os.getpid()}-{time.monotonic_ns()}.log"
        self._stderr = open(self.stderr_path, "w+")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self._stderr, text=True, env=env)
        self.url = None
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while self.url is None:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.kill()
                raise AssertionError(f"serve did not become ready: {self.stderr()}")
            if selector.select(timeout=0.5):
                line = self.proc.stdout.readline()
                match = READY.search(line)
                if match:
                    self.url = match.group(1)
        selector.close()
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        self.host, self.port = host, int(port)

    def stderr(self):
        self._stderr.flush()
        with open(self.stderr_path) as f:
            return f.read()

    def pid(self):
        return self.proc.pid

    def rss_kb(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def stop(self, timeout=60):
        """SIGTERM and wait; returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"serve did not stop within {timeout} s: {self.stderr()}")
        return self.proc.returncode

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self):
        self.kill()
        self.proc.stdout.close()
        self._stderr.close()
        os.unlink(self.stderr_path)

    # ---- HTTP ----

    def request(self, method, path, body=None, headers=None, timeout=120):
        """(status, headers, parsed JSON or text) of one request; body: dict, str or bytes."""
        data = body
        if isinstance(body, (dict, list)):
            data = json.dumps(body).encode()
        elif isinstance(body, str):
            data = body.encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, dict(resp.headers), _decode(resp.read(), resp.headers)
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), _decode(e.read(), e.headers)

    def post(self, path, body, **kw):
        return self.request("POST", path, body, **kw)

    def stream(self, path, body, timeout=120):
        """Yields the JSON payload of each SSE event (the string "[DONE]" last)."""
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method="POST")
        req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            assert resp.headers["Content-Type"].startswith("text/event-stream")
            for raw in resp:
                line = raw.decode().rstrip("\n")
                if not line.startswith("data: "):
                    continue
                payload = line[len("data: "):]
                yield payload if payload == "[DONE]" else json.loads(payload)

    def raw(self, data, read=True, timeout=30):
        """Sends raw bytes on a fresh connection; returns what the server answered."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as s:
            s.sendall(data)
            if not read:
                return b""
            chunks = []
            try:
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
                    if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                        break
            except socket.timeout:
                pass
            return b"".join(chunks)


def _decode(raw, headers):
    text = raw.decode(errors="replace")
    if (headers.get("Content-Type") or "").startswith("application/json"):
        return json.loads(text)
    return text


def _complete(response):
    head, _, body = response.partition(b"\r\n\r\n")
    match = re.search(rb"(?i)content-length:\s*(\d+)", head)
    return match is not None and len(body) >= int(match.group(1))


def status_of(raw_response):
    return int(raw_response.split(b" ", 2)[1])


def json_body(raw_response):
    return json.loads(raw_response.partition(b"\r\n\r\n")[2])
