"""Hugging Face tokenizers on the same file as bench/tokenizer_bench.cpp, single thread:
`python3 bench/tokenizer_hf_bench.py TOKENIZER_JSON TEXT_FILE [N_REPEATS]` (encode_batch off).
Times are the thread's CPU time, as in tokenizer_bench.
For a vocab.json + merges.txt directory, assemble tokenizer.json first (see
tests/text/test_tokenizer_vs_hf.py, qwen_tokenizer_json)."""
import os
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

from tokenizers import Tokenizer  # noqa: E402


def best(n_repeats, work):
    times = []
    for _ in range(n_repeats):
        start = time.thread_time()
        result = work()
        times.append(time.thread_time() - start)
    return min(times), result


def main():
    tokenizer = Tokenizer.from_file(sys.argv[1])
    with open(sys.argv[2], encoding="utf-8") as handle:
        text = handle.read()
    n_repeats = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    n_bytes = len(text.encode("utf-8"))
    seconds, encoding = best(n_repeats, lambda: tokenizer.encode(text, add_special_tokens=False))
    print(f"encode (one call)     {n_bytes / 1e6 / seconds:8.2f} MB/s ({seconds:.3f} s), {len(encoding.ids)} tokens")
    ids = encoding.ids
    raw = text.encode("utf-8")
    chunks = []
    offset = 0
    while offset < len(raw):
        end = min(len(raw), offset + 4096)
        while end < len(raw) and (raw[end] & 0xC0) == 0x80:
            end += 1
        chunks.append(raw[offset:end].decode("utf-8"))
        offset = end
    seconds, _ = best(n_repeats, lambda: [tokenizer.encode(chunk, add_special_tokens=False) for chunk in chunks])
    print(f"encode (4 KiB chunks) {n_bytes / 1e6 / seconds:8.2f} MB/s ({seconds:.3f} s)")
    seconds, _ = best(n_repeats, lambda: tokenizer.decode(ids, skip_special_tokens=False))
    print(f"decode (one call)     {n_bytes / 1e6 / seconds:8.2f} MB/s ({seconds:.3f} s)")


if __name__ == "__main__":
    main()
