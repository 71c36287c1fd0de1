"""The loop check run on a growing answer (seed "Reports and resume"): four exact repetitions of
a block of 32 to 512 words at the end of the output. It finds verbatim loops only; a model that
circles with small variations is not caught."""

MIN_BLOCK_WORDS = 32
MAX_BLOCK_WORDS = 512
REPEATS = 4


def find_cycle(text):
    """Evidence of a loop at the tail of `text` (the block, its length in words and where the
    repetitions start), or None."""
    words = text.split()
    n = len(words)
    for block in range(MIN_BLOCK_WORDS, min(MAX_BLOCK_WORDS, n // REPEATS) + 1):
        tail = words[n - block:]
        if all(words[n - (k + 1) * block:n - k * block] == tail for k in range(1, REPEATS)):
            return {"block_words": block, "repeats": REPEATS, "start_word": n - REPEATS * block,
                    "total_words": n, "block": " ".join(tail)}
    return None
