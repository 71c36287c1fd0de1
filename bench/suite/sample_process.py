"""One sample's process: started fresh, watched while it runs (the loop check and the power
source every few seconds, an optional time limit), stopped when a check fires, and its output
collected. The child dies with the runner (PR_SET_PDEATHSIG), so a killed run leaves no engine
behind to compete with the next one."""
from __future__ import annotations

import ctypes
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from .cycle_check import find_cycle
from .machine import power_source

PR_SET_PDEATHSIG = 1


def _die_with_parent():
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


@dataclass
class ProcessResult:
    exit_code: int | None
    stdout: bytes
    stderr: str
    wall_s: float
    cycle: dict | None = None
    power_readings: list = field(default_factory=list)
    power_changed: bool = False
    timed_out: bool = False
    start_error: str | None = None


def _reader(stream, sink):
    while True:
        chunk = stream.read1(65536) if hasattr(stream, "read1") else stream.read(65536)
        if not chunk:
            break
        sink.append(chunk)


def _stop(proc):
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_watched(command, cycle_check_s, power_check_s, timeout_s=None):
    power_start = power_source()
    readings = [{"t": 0.0, "source": power_start}]
    start = time.monotonic()
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=_die_with_parent)
    except OSError as e:
        return ProcessResult(None, b"", "", 0.0, start_error=str(e), power_readings=readings)
    out_chunks, err_chunks = [], []
    threads = [threading.Thread(target=_reader, args=(proc.stdout, out_chunks), daemon=True),
               threading.Thread(target=_reader, args=(proc.stderr, err_chunks), daemon=True)]
    for t in threads:
        t.start()
    result = ProcessResult(None, b"", "", 0.0, power_readings=readings)
    next_cycle = start + cycle_check_s
    next_power = start + power_check_s
    try:
        while proc.poll() is None:
            time.sleep(min(0.1, cycle_check_s / 4))
            now = time.monotonic()
            if now >= next_cycle:
                next_cycle = now + cycle_check_s
                evidence = find_cycle(b"".join(out_chunks).decode("utf-8", "ignore"))
                if evidence:
                    result.cycle = evidence
                    _stop(proc)
                    break
            if now >= next_power:
                next_power = now + power_check_s
                source = power_source()
                readings.append({"t": round(now - start, 1), "source": source})
                if source != power_start:
                    result.power_changed = True
                    _stop(proc)
                    break
            if timeout_s is not None and now - start > timeout_s:
                result.timed_out = True
                _stop(proc)
                break
    finally:
        if proc.poll() is None:
            _stop(proc)
    for t in threads:
        t.join()
    result.wall_s = round(time.monotonic() - start, 3)
    result.exit_code = proc.returncode
    result.stdout = b"".join(out_chunks)
    result.stderr = b"".join(err_chunks).decode("utf-8", "replace")
    end_source = power_source()
    readings.append({"t": result.wall_s, "source": end_source})
    if end_source != power_start:
        result.power_changed = True
    if result.cycle is None and not result.timed_out:
        result.cycle = find_cycle(result.stdout.decode("utf-8", "ignore"))
    return result
