#!/usr/bin/env python3
"""Raw read bandwidth of a store's experts.bin, bypassing the page cache (O_DIRECT): 16 MiB
sequential blocks over the first 2 GiB, and 200 whole expert records at random offsets (what a
cold decode reads). Prints one JSON object. --evict then drops the file's pages from the page
cache (posix_fadvise DONTNEED on that file only), so a following run reads from the disk.

    bench/disk_bandwidth.py STORE_DIR [--evict]
"""
import json
import mmap
import os
import random
import sys
import time


def main():
    store = sys.argv[1]
    path = os.path.join(store, "experts.bin")
    record = json.load(open(os.path.join(store, "manifest.json")))["experts"]["record_bytes"]
    size = os.path.getsize(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)

    def timed(offsets, n_bytes):
        buf = mmap.mmap(-1, n_bytes)  # page-aligned, as O_DIRECT needs
        start, done = time.monotonic(), 0
        for offset in offsets:
            done += os.preadv(fd, [buf], offset)
        return done, time.monotonic() - start

    block = 16 << 20
    seq_bytes = min(size, 2 << 30)  # the first 2 GiB, or the whole file
    done, seconds = timed(range(0, seq_bytes - block + 1, block), block)
    records = size // record
    rng = random.Random(1)
    picks = [rng.randrange(records) * record for _ in range(min(200, records))]
    rdone, rseconds = timed(picks, record)
    os.close(fd)
    if "--evict" in sys.argv[2:]:
        fd = os.open(path, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    json.dump({"sequential_mb_per_s": done / 1e6 / seconds, "sequential_bytes": done,
               "random_record_mb_per_s": rdone / 1e6 / rseconds, "random_records": len(picks),
               "record_bytes": record, "experts_bin_bytes": size}, sys.stdout)


if __name__ == "__main__":
    main()
