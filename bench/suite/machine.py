"""The facts about the machine a report records (provenance.hardware_detail), read through the
kernel's files and nvidia-smi: kernel, memory, CPU threads, GPUs, the model volume, the power
source, and an uncached read sample of the expert store. Nothing that identifies the machine
(hostname, serials, UUIDs, paths under home) is read."""
import mmap
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path

READ_SAMPLE_BYTES = 2_000_000_000  # the seed's two-gigabyte sample
READ_BLOCK_BYTES = 16 << 20


def _meminfo_bytes(key):
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def gpus():
    """Each NVIDIA GPU's name, driver and memory (no serial or UUID), or [] without nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in out.stdout.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3:
            try:
                memory = int(float(parts[2])) * (1 << 20)
            except ValueError:
                memory = None
            found.append({"name": parts[0], "driver": parts[1], "memory_bytes": memory})
    return found


def power_source():
    """"ac", "battery" or "unknown" (no power supply class, as on most servers)."""
    base = Path("/sys/class/power_supply")
    mains = []
    try:
        for supply in sorted(base.iterdir()):
            try:
                if (supply / "type").read_text().strip() == "Mains":
                    mains.append((supply / "online").read_text().strip() == "1")
            except OSError:
                continue
    except OSError:
        return "unknown"
    if not mains:
        return "unknown"
    return "ac" if any(mains) else "battery"


def volume(path):
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return {"capacity_bytes": st.f_blocks * st.f_frsize, "free_bytes": st.f_bavail * st.f_frsize}


def read_sample(store_dir, limit=READ_SAMPLE_BYTES):
    """Reads up to `limit` bytes of the expert tables (experts.bin first) past the page cache
    (O_DIRECT into a page-aligned buffer) and returns the rate. Where O_DIRECT is refused the
    files' cached pages are dropped first (posix_fadvise DONTNEED) and the method says so."""
    files = [Path(store_dir) / n for n in ("experts.bin", "experts3.bin", "experts2.bin")]
    files = [f for f in files if f.is_file()]
    if not files:
        return None
    buf = mmap.mmap(-1, READ_BLOCK_BYTES)
    done, method, seconds = 0, "O_DIRECT", 0.0
    for path in files:
        if done >= limit:
            break
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECT", 0))
        except OSError:
            fd = os.open(path, os.O_RDONLY)
            method = "buffered after posix_fadvise(DONTNEED)"
        try:
            if method != "O_DIRECT":
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            offset = 0
            start = time.monotonic()
            while done < limit:
                try:
                    n = os.preadv(fd, [buf], offset)
                except OSError:
                    # Some filesystems accept O_DIRECT at open and refuse the read.
                    os.close(fd)
                    fd = os.open(path, os.O_RDONLY)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                    method = "buffered after posix_fadvise(DONTNEED)"
                    continue
                if n <= 0:
                    break
                done += n
                offset += n
            seconds += time.monotonic() - start
        finally:
            os.close(fd)
    buf.close()
    return {"bytes": done, "seconds": round(seconds, 4), "gb_per_s": round(done / 1e9 / seconds, 3) if seconds else None,
            "method": method, "files": [f.name for f in files]}


def hardware_detail(store_dir):
    uname = os.uname()
    detail = {
        "kernel": f"{uname.sysname} {uname.release}",
        "architecture": uname.machine,
        "memory_bytes": _meminfo_bytes("MemTotal"),
        "cpu_threads": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "gpus": gpus(),
        "model_volume": volume(store_dir),
        "power": power_source(),
    }
    return detail


def stable_facts(detail):
    """The facts a resumed run must share with the first (free space and rates move)."""
    return {k: detail.get(k) for k in ("kernel", "architecture", "memory_bytes", "cpu_threads", "cpu_model", "gpus")}


def describe(detail):
    """One line of hardware facts: the summary's first line."""
    parts = [f"{detail.get('kernel')} {detail.get('architecture')}"]
    if detail.get("cpu_model"):
        parts.append(f"{detail['cpu_model']}, {detail.get('cpu_threads')} CPU threads")
    else:
        parts.append(f"{detail.get('cpu_threads')} CPU threads")
    if detail.get("memory_bytes"):
        parts.append(f"{detail['memory_bytes'] / 2**30:.1f} GiB memory")
    for gpu in detail.get("gpus") or []:
        memory = f", {gpu['memory_bytes'] / 2**30:.1f} GiB" if gpu.get("memory_bytes") else ""
        parts.append(f"{gpu['name']} (driver {gpu['driver']}{memory})")
    if not detail.get("gpus"):
        parts.append("no GPU")
    vol = detail.get("model_volume")
    if vol:
        parts.append(f"model volume {vol['capacity_bytes'] / 1e9:.0f} GB ({vol['free_bytes'] / 1e9:.0f} GB free)")
    read = detail.get("expert_read")
    if read and read.get("gb_per_s") is not None:
        parts.append(f"expert store read {read['gb_per_s']:.2f} GB/s ({read['bytes'] / 1e9:.2f} GB, {read['method']})")
    if detail.get("power") not in (None, "unknown"):
        parts.append(f"power {detail['power']}")
    return "; ".join(parts)
