"""Starts `cherenkov serve` for the serving benchmarks (serve_bench.py, prefix_cache_bench.py):
any free port, a private control socket (the default path allows one server per user, and another
may be running), and the URL read from the ready line."""
import os
import re
import selectors
import subprocess
import sys
import tempfile
import time


def start_server(binary, model, flags, ready_seconds=600):
    """(process, base URL) of a server on `model` with `flags`; exits the script when the server
    stops or is not ready within `ready_seconds`."""
    socket = os.path.join(tempfile.mkdtemp(prefix="cherenkov-bench-"), "control.sock")
    proc = subprocess.Popen([binary, "serve", model, "--port", "0", "--socket", socket, *flags],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + ready_seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("serve exited before it was ready")
        if sel.select(timeout=0.5):
            match = re.search(r"at (http://\S+)/v1", proc.stdout.readline())
            if match:
                return proc, match.group(1)
    proc.kill()
    sys.exit(f"serve was not ready within {ready_seconds} s")
