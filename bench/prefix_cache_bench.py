#!/usr/bin/env python3
"""The prefix cache of `cherenkov serve`: time to first token with and without a cached shared
prefix, checkpoint bytes per token, and checkpoint save and restore times.

    bench/prefix_cache_bench.py MODEL [--binary build/cherenkov] [--prefix-tokens 2000]
                                [--rounds 3] [--text FILE] [-- SERVE FLAGS...]

One server (`cherenkov serve MODEL --prefix-cache-interval 0` plus the flags after `--`, e.g.
`--backend cuda --prefix-cache-mb 4096`), then:
1. Time to first token of chat requests whose system message is a shared text of about
   --prefix-tokens tokens (the start of --text, default models/tiny-python/heldout_sample.txt),
   each round with a fresh variant of it: the first request of a round computes it afresh
   (uncached), a second request with another question restores the checkpoint saved where the
   system message ends (cached), a third repeats the second exactly (an exact hit). Streams,
   one token out (max_tokens 1), the median over rounds.
2. Checkpoint size: two raw completions of random token ids, 256 and --prefix-tokens long, each
   save one checkpoint (the complete prompt); the difference per token is the per-token cost, the
   rest the fixed part (recurrent and convolution states, the last row's logits). Save time is
   the longer one's; restore time comes from repeating it (an exact hit).

Prints a table and one JSON line. Standard library only.
"""
import argparse
import json
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import serve_process  # noqa: E402  (bench/, the script's own folder)

REPO = Path(__file__).resolve().parents[1]


def start_server(binary, model, flags):
    return serve_process.start_server(binary, model, ["--prefix-cache-interval", "0", *flags])


def post(url, path, body):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=3600) as resp:
        return json.load(resp)


def first_token(url, messages):
    """(time to first token, usage, timings) of one streamed chat request of one token."""
    body = {"messages": messages, "max_tokens": 1, "stream": True,
            "stream_options": {"include_usage": True}}
    req = urllib.request.Request(url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 method="POST", headers={"Content-Type": "application/json"})
    start = time.monotonic()
    first = usage = timings = None
    with urllib.request.urlopen(req, timeout=3600) as resp:
        for raw in resp:
            line = raw.decode()
            if not line.startswith("data: ") or line.startswith("data: [DONE]"):
                continue
            event = json.loads(line[6:])
            if event.get("choices") and first is None and (
                    event["choices"][0]["delta"].get("content") or event["choices"][0]["finish_reason"]):
                first = time.monotonic()
            if "timings" in event:
                timings = event["timings"]
            if event.get("usage"):
                usage = event["usage"]
    return first - start, usage, timings


def shared_text(binary, model, path, tokens):
    """About `tokens` tokens of the text in `path`, cut at a token boundary."""
    text = Path(path).read_text(errors="replace")
    ids = json.loads(subprocess.run([binary, "tokenize", model, text, "--json"], capture_output=True,
                                    text=True, check=True).stdout)["ids"]
    if len(ids) < tokens:
        text = text * (tokens // max(len(ids), 1) + 1)
        ids = json.loads(subprocess.run([binary, "tokenize", model, text, "--json"], capture_output=True,
                                        text=True, check=True).stdout)["ids"]
    return subprocess.run([binary, "detokenize", model, ",".join(map(str, ids[:tokens]))],
                          capture_output=True, text=True, check=True).stdout


def median(values):
    values = sorted(values)
    return values[len(values) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("--binary", default=str(REPO / "build" / "cherenkov"))
    parser.add_argument("--prefix-tokens", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--text", default=str(REPO / "models" / "tiny-python" / "heldout_sample.txt"))
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    text = shared_text(args.binary, args.model, args.text, args.prefix_tokens)

    proc, url = start_server(args.binary, args.model, flags)
    try:
        uncached, cached, exact, cached_tokens, prompt_tokens = [], [], [], [], []
        for round_ in range(args.rounds):
            # A different first line each round: nothing of the previous rounds matches.
            system = {"role": "system", "content": f"Session {round_} ({random.random():.6f}).\n{text}"}
            ttft, usage, _ = first_token(url, [system, {"role": "user", "content": "Summarize the code."}])
            assert usage["prompt_tokens_details"]["cached_tokens"] == 0, usage
            uncached.append(ttft)
            question = [system, {"role": "user", "content": "Which function is the longest?"}]
            ttft, usage, _ = first_token(url, question)
            cached.append(ttft)
            cached_tokens.append(usage["prompt_tokens_details"]["cached_tokens"])
            prompt_tokens.append(usage["prompt_tokens"])
            ttft, usage, _ = first_token(url, question)
            assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"], usage
            exact.append(ttft)

        # Checkpoint size per token: one checkpoint each (interval checkpoints are off).
        rng = random.Random(7)
        sizes = {}
        for n in (256, args.prefix_tokens):
            prompt = [rng.randrange(1, 256) for _ in range(n)]
            saved = post(url, "/v1/completions", {"prompt": prompt, "max_tokens": 1})
            assert saved["timings"]["cache_checkpoints_saved"] == 1, saved["timings"]
            restored = post(url, "/v1/completions", {"prompt": prompt, "max_tokens": 1})
            sizes[n] = (saved["timings"]["cache_checkpoint_bytes"], saved["timings"]["cache_save_seconds"],
                        restored["timings"]["cache_restore_seconds"])
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

    short, long_ = sizes[256], sizes[args.prefix_tokens]
    per_token = (long_[0] - short[0]) / (args.prefix_tokens - 256)
    fixed = short[0] - 256 * per_token
    result = {
        "prefix_tokens": args.prefix_tokens,
        "prompt_tokens": median(prompt_tokens),
        "cached_tokens": median(cached_tokens),
        "ttft_uncached_seconds": median(uncached),
        "ttft_cached_seconds": median(cached),
        "ttft_exact_hit_seconds": median(exact),
        "cached_over_uncached": median(cached) / median(uncached),
        "checkpoint_bytes_per_token": per_token,
        "checkpoint_fixed_bytes": fixed,
        "checkpoint_bytes": long_[0],
        "checkpoint_save_seconds": long_[1],
        "checkpoint_restore_seconds": long_[2],
        "flags": flags,
    }
    print(f"shared prefix: {result['prompt_tokens']}-token prompts, {result['cached_tokens']} tokens restored")
    print(f"time to first token: uncached {1000 * result['ttft_uncached_seconds']:.1f} ms, "
          f"cached {1000 * result['ttft_cached_seconds']:.1f} ms "
          f"({100 * result['cached_over_uncached']:.1f}%), exact hit {1000 * result['ttft_exact_hit_seconds']:.1f} ms")
    print(f"checkpoint: {per_token:.0f} B per token + {fixed / 2**20:.2f} MiB fixed; "
          f"{args.prefix_tokens} tokens: {long_[0] / 2**20:.2f} MiB, saved in {1000 * long_[1]:.2f} ms, "
          f"restored in {1000 * long_[2]:.2f} ms")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
