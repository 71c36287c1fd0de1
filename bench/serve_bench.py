#!/usr/bin/env python3
"""Server overhead, time to first token and interleaving throughput of `cherenkov serve`.

    bench/serve_bench.py MODEL [--binary build/cherenkov] [--prompt-tokens 128]
                         [--gen-tokens 128] [--rounds 3] [-- ENGINE FLAGS...]

For the same model and engine flags (after `--`, e.g. `--backend cuda --pool-gb max`) it runs:
1. `cherenkov bench MODEL --prompt-tokens P --gen-tokens G --drafts 0 --json`: the engine's
   decode rate on its own random prompt (best of its repeats);
2. `cherenkov MODEL TEXT --raw --max-tokens G --no-eos --drafts 0`, per round: the CLI's decode
   rate on the prompt the server gets (TEXT: Python source of about P tokens), the baseline the
   overhead is measured against, since the rate depends on the prompt through expert routing;
3. `cherenkov serve MODEL --no-eos --drafts 0` and one streaming completion of TEXT with
   max_tokens G, per round: the decode rate the client sees (tokens after the first over the
   time from the first to the last token) and the server's own (its timings), and the time to
   first token;
4. two such requests at once: the aggregate rate (all tokens over the wall time) and each
   request's rate.

Prints a table and one JSON line. Standard library only. Drafts are off in both, so the ratio
measures the server, not speculation.
"""
import argparse
import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import serve_process  # noqa: E402  (bench/, the script's own folder)

REPO = Path(__file__).resolve().parents[1]


def start_server(binary, model, flags):
    return serve_process.start_server(binary, model, ["--no-eos", "--drafts", "0", *flags])


def prompt_text(tokens):
    """Python source of roughly `tokens` tokens (about 3.5 characters a token)."""
    source = (REPO / "bench" / "serve_bench.py").read_text()
    return (source * (1 + tokens * 4 // len(source)))[:tokens * 7 // 2]


def cli_decode_rate(binary, model, text, gen_tokens, flags):
    result = subprocess.run([binary, model, text, "--raw", "--max-tokens", str(gen_tokens), "--no-eos",
                             "--drafts", "0", *flags], capture_output=True, text=True, check=True)
    match = re.search(r"decode: \d+ tokens in [\d.]+ s \(([\d.]+) tok/s\)", result.stderr)
    return float(match.group(1))


def stream_once(url, prompt, gen_tokens):
    """(time to first token, client decode tok/s, server decode tok/s, tokens, start, end)."""
    body = json.dumps({"prompt": prompt, "max_tokens": gen_tokens, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json"})
    start = time.monotonic()
    first = last = None
    timings = usage = None
    with urllib.request.urlopen(req, timeout=3600) as resp:
        for raw in resp:
            line = raw.decode()
            if not line.startswith("data: ") or line.startswith("data: [DONE]"):
                continue
            event = json.loads(line[6:])
            now = time.monotonic()
            if event.get("choices") and event["choices"][0].get("text"):
                first = first or now
                last = now
            if "timings" in event:
                timings = event["timings"]
            if event.get("usage"):
                usage = event["usage"]
    tokens = usage["completion_tokens"]
    # A model whose vocabulary outruns its tokenizer's (a synthetic store) emits ids without text:
    # then the client-side figures are left out (nan) and the server's timings still count.
    client_rate = (tokens - 1) / (last - first) if last and first and last > first else float("nan")
    server_rate = (tokens - 1) / timings["decode_seconds"] if timings["decode_seconds"] > 0 else 0.0
    ttft = first - start if first else float("nan")
    return ttft, client_rate, server_rate, tokens, start, time.monotonic()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="Engine flags for both bench and serve follow `--`.")
    parser.add_argument("model")
    parser.add_argument("--binary", default=str(REPO / "build" / "cherenkov"))
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--gen-tokens", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3)
    argv = sys.argv[1:]
    flags = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)

    bench = subprocess.run([args.binary, "bench", args.model, "--prompt-tokens", str(args.prompt_tokens),
                            "--gen-tokens", str(args.gen_tokens), "--drafts", "0", "--repeat", str(args.rounds),
                            "--json", *flags], capture_output=True, text=True, check=True)
    report = json.loads(bench.stdout)
    engine_rate = report["best_decode_tokens_per_second"]

    text = prompt_text(args.prompt_tokens)
    cli = [cli_decode_rate(args.binary, args.model, text, args.gen_tokens, flags) for _ in range(args.rounds)]
    proc, url = start_server(args.binary, args.model, flags)
    try:
        with urllib.request.urlopen(url + "/v1/models") as resp:
            json.load(resp)
        solo = [stream_once(url, text, args.gen_tokens) for _ in range(args.rounds)]
        pair = []
        for _ in range(args.rounds):
            results = [None, None]

            def run(i):
                results[i] = stream_once(url, text, args.gen_tokens)
            threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            wall = max(r[5] for r in results) - min(r[4] for r in results)
            pair.append((sum(r[3] for r in results) / wall, [r[1] for r in results]))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)

    best_cli = max(cli)
    best_client = max(s[1] for s in solo)
    best_server = max(s[2] for s in solo)
    ttft = sorted(s[0] for s in solo)[len(solo) // 2]
    best_pair = max(p[0] for p in pair)
    print(f"engine (cherenkov bench, random prompt, best of {args.rounds}): {engine_rate:.1f} tok/s decode")
    print(f"engine (CLI on the server's prompt, best of {args.rounds}): {best_cli:.1f} tok/s decode")
    print(f"one stream, client-side decode (best): {best_client:.1f} tok/s "
          f"({100 * (1 - best_client / best_cli):+.1f}% overhead vs the CLI)")
    print(f"one stream, server timings (best): {best_server:.1f} tok/s")
    print(f"time to first token (median, {args.prompt_tokens}-token prompt): {1000 * ttft:.1f} ms")
    print(f"two interleaved streams: {best_pair:.1f} tok/s aggregate (best); "
          f"per stream {', '.join(f'{r:.1f}' for r in pair[0][1])}")
    print(json.dumps({"engine_decode_tps": engine_rate, "cli_decode_tps": best_cli,
                      "serve_client_decode_tps": best_client,
                      "serve_server_decode_tps": best_server, "overhead": 1 - best_client / best_cli,
                      "ttft_seconds": ttft, "interleaved_aggregate_tps": best_pair,
                      "prompt_tokens": args.prompt_tokens, "gen_tokens": args.gen_tokens, "flags": flags}))


if __name__ == "__main__":
    main()
