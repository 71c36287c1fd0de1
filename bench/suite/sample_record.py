"""What one finished process means: its status (ok, capped, cycle, engine-error, timeout,
memory-invalid, power-change), the figures parsed from stderr, the answer's length and the
memory figure that the report shows and checks against the machine."""
import statistics

from .engine_cli import parse_generation_stderr


def memory_figure(stats, machine_memory_bytes):
    """The sample's memory as memory_stats reports it once the answer is done. With CUDA: the
    device memory in use (cudaMemGetInfo total minus free), which includes the prefill scratch
    the engine reserves at load and keeps; on the CPU: the process's resident set. A figure
    above the device's (or the machine's) memory, or a peak RSS above the machine's, makes the
    sample invalid."""
    if not stats:
        return None
    memory = {k: stats.get(k) for k in ("rss_bytes", "peak_rss_bytes", "dense_bytes", "state_bytes",
                                        "expert_pool_bytes", "expert_hit_rate", "experts_read_bytes",
                                        "prefill_chunk_tokens")}
    device = stats.get("device") if isinstance(stats.get("device"), dict) else None
    limit = machine_memory_bytes
    if device and device.get("device_total_bytes") is not None and device.get("device_free_bytes") is not None:
        memory["figure"] = "device_used"
        memory["figure_bytes"] = device["device_total_bytes"] - device["device_free_bytes"]
        memory["limit_bytes"] = device["device_total_bytes"]
        for k in ("device_weights_bytes", "device_expert_pool_bytes", "device_scratch_bytes",
                  "device_scratch_reserved_bytes", "device_expert_hit_rate"):
            memory[k] = device.get(k)
    else:
        memory["figure"] = "rss"
        memory["figure_bytes"] = stats.get("rss_bytes")
        memory["limit_bytes"] = limit
    over = []
    if memory["figure_bytes"] is not None and memory["limit_bytes"] and memory["figure_bytes"] > memory["limit_bytes"]:
        over.append(f"{memory['figure']} {memory['figure_bytes']} B above {memory['limit_bytes']} B")
    peak = stats.get("peak_rss_bytes")
    if peak is not None and machine_memory_bytes and peak > machine_memory_bytes:
        over.append(f"peak RSS {peak} B above the machine's {machine_memory_bytes} B")
    memory["over_limit"] = over
    return memory


def classify(process, answer, machine_memory_bytes):
    """The record fields of a finished sample (status and figures), from its ProcessResult."""
    figures = parse_generation_stderr(process.stderr)
    record = {"exit_code": process.exit_code, "wall_s": process.wall_s, "power": process.power_readings}
    record["answer_words"] = len(answer.split())
    record["answer_chars"] = len(answer)
    for key in ("load_s", "prefill", "decode", "mtp", "backend", "expert_pool"):
        if key in figures:
            record[key] = figures[key]
    record["memory"] = memory_figure(figures.get("memory_stats"), machine_memory_bytes)
    decode, prefill = figures.get("decode"), figures.get("prefill")
    if decode and decode["tokens"] == 0:
        # The first token comes from the prefill; with nothing after it there is no rate.
        decode["tok_s"] = None
    if decode and prefill:
        generated = decode["tokens"] + 1
        record["answer_tokens"] = generated - (1 if decode["stop"] == "eos" else 0)
        record["completion_s"] = round(prefill["seconds"] + decode["seconds"], 3)
    if process.start_error:
        return dict(record, status="engine-error", error=f"cannot start: {process.start_error}")
    if process.power_changed:
        return dict(record, status="power-change", error="the power source changed during the sample")
    if process.cycle:
        return dict(record, status="cycle", cycle=process.cycle)
    if process.timed_out:
        return dict(record, status="timeout", error="the sample ran past the suite's sample_timeout_seconds")
    if process.exit_code != 0:
        tail = "\n".join(process.stderr.strip().splitlines()[-5:])
        return dict(record, status="engine-error", error=f"exit {process.exit_code}: {tail}")
    if not decode or not prefill:
        return dict(record, status="engine-error", error="no prefill/decode timing lines on stderr")
    if record["memory"] and record["memory"]["over_limit"]:
        return dict(record, status="memory-invalid", error="; ".join(record["memory"]["over_limit"]))
    if decode["stop"] == "length":
        return dict(record, status="capped")
    if decode["stop"] != "eos":
        return dict(record, status="engine-error", error=f"stopped for {decode['stop']!r}")
    return dict(record, status="ok")


def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
