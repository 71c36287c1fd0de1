#!/usr/bin/env python3
"""Runs a command under a memory limit, for the peer benchmark's streaming regime
(bench/peers/llama_cpp_cpu.sh): a child memory cgroup under this process's own (cgroup v2 or
the v1 memory controller; no systemd needed), so page cache the command faults in counts against
the limit as its anonymous memory does, and a model mapped from a file larger than the limit is
read from the disk again and again instead of staying in RAM. Before the command starts, the
pages of every --evict file are dropped from the page cache (posix_fadvise DONTNEED), so nothing
charged elsewhere serves it. While it runs, the cgroup's usage and anonymous memory are polled;
their peaks go to --report as JSON. The command's stdout and stderr pass through; the exit status
is the command's (1 when the cgroup cannot be made, with the reason).

    bench/peers/memlimit.py [--limit BYTES] [--evict FILE]... [--report JSON] -- CMD ARGS...
    bench/peers/memlimit.py --check      (exit 0 when a memory cgroup can be made here, else why)
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = "/sys/fs/cgroup"


class CgroupError(Exception):
    pass


def own_cgroup():
    """(version, directory of this process's memory cgroup)."""
    with open("/proc/self/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "memory" in controllers.split(","):
            base = os.path.join(ROOT, "memory")
            if os.path.isdir(base):
                return 1, base + path
    for hierarchy, controllers, path in lines:
        if hierarchy == "0" and controllers == "":
            base = ROOT if os.path.exists(os.path.join(ROOT, "cgroup.controllers")) else os.path.join(ROOT, "unified")
            directory = base + path
            try:
                with open(os.path.join(directory, "cgroup.controllers")) as f:
                    if "memory" not in f.read().split():
                        raise CgroupError(f"cgroup v2 at {directory} does not delegate the memory controller")
            except OSError as e:
                raise CgroupError(f"cannot read {directory}/cgroup.controllers: {e.strerror}")
            return 2, directory
    raise CgroupError("no memory cgroup in /proc/self/cgroup")


def write(path, value):
    try:
        with open(path, "w") as f:
            f.write(str(value))
    except OSError as e:
        raise CgroupError(f"cannot write {path}: {e.strerror}")


def read_int(path):
    with open(path) as f:
        text = f.read().strip()
    return 0 if text == "max" else int(text)


def anon_bytes(version, directory):
    key = "rss" if version == 1 else "anon"
    with open(os.path.join(directory, "memory.stat")) as f:
        for line in f:
            name, value = line.split()
            if name == key:
                return int(value)
    return 0


def make_cgroup(limit):
    version, parent = own_cgroup()
    directory = os.path.join(parent, f"cherenkov-memlimit-{os.getpid()}")
    try:
        os.mkdir(directory)
    except OSError as e:
        raise CgroupError(f"cannot create {directory}: {e.strerror}")
    try:
        if limit:
            write(os.path.join(directory, "memory.limit_in_bytes" if version == 1 else "memory.max"), limit)
            swap = os.path.join(directory, "memory.swap.max")
            if version == 2 and os.path.exists(swap):
                write(swap, 0)  # the limit must not be met by swapping out
    except CgroupError:
        os.rmdir(directory)
        raise
    return version, directory


def evict(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=0, help="bytes (default: no limit, only measure)")
    parser.add_argument("--evict", action="append", default=[], help="file whose pages are dropped first")
    parser.add_argument("--report", help="JSON file for the peaks")
    parser.add_argument("--check", action="store_true", help="only say whether a memory cgroup can be made")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.limit < 0:
        parser.error("--limit must be at least 0")
    if not args.check and not command:
        parser.error("no command after --")
    try:
        version, directory = make_cgroup(args.limit or (1 << 40))
    except CgroupError as e:
        print(f"memlimit.py: no memory cgroup: {e}", file=sys.stderr)
        return 1
    if args.check:
        os.rmdir(directory)
        print(f"memory cgroup v{version} under {os.path.dirname(directory)}")
        return 0
    for path in args.evict:
        try:
            evict(path)
        except OSError as e:
            print(f"memlimit.py: cannot evict {path}: {e.strerror}", file=sys.stderr)
            os.rmdir(directory)
            return 1
    procs = os.path.join(directory, "cgroup.procs")
    # The child joins the cgroup before it executes the command, so every page it touches counts.
    try:
        child = subprocess.Popen(command, preexec_fn=lambda: write(procs, os.getpid()))
    except (OSError, subprocess.SubprocessError) as e:
        print(f"memlimit.py: cannot start {command[0]} in {directory}: {e}", file=sys.stderr)
        os.rmdir(directory)
        return 1
    peak_anon = peak_usage = 0
    usage_file = os.path.join(directory, "memory.usage_in_bytes" if version == 1 else "memory.current")
    while child.poll() is None:
        try:
            peak_anon = max(peak_anon, anon_bytes(version, directory))
            peak_usage = max(peak_usage, read_int(usage_file))
        except (OSError, ValueError):
            pass
        time.sleep(0.05)
    report = {"cgroup": f"v{version}", "limit_bytes": args.limit, "peak_anon_bytes": peak_anon,
              "peak_usage_bytes": peak_usage, "exit_status": child.returncode}
    if version == 1:
        report["peak_usage_bytes"] = max(peak_usage, read_int(os.path.join(directory, "memory.max_usage_in_bytes")))
        report["limit_hits"] = read_int(os.path.join(directory, "memory.failcnt"))
    if args.report:
        with open(args.report + ".tmp", "w") as f:
            json.dump(report, f)
        os.replace(args.report + ".tmp", args.report)
    # Page cache still charged here moves to the parent when the cgroup is removed (v1: after
    # force_empty); a busy cgroup takes a moment to empty after its last process exits.
    for _ in range(100):
        try:
            if version == 1:
                write(os.path.join(directory, "memory.force_empty"), 0)
            os.rmdir(directory)
            break
        except (OSError, CgroupError):
            time.sleep(0.1)
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


if __name__ == "__main__":
    sys.exit(main())
