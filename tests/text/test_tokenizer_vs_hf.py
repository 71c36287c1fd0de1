"""`cherenkov tokenize` / `detokenize` against Hugging Face `tokenizers`, computed at test time.

Tokenizers compared: the real Qwen2/Qwen3 files from tests/data (a full tokenizer.json
assembled from the recorded skeleton + vocab.json + merges.txt, and the vocab.json + merges.txt
+ tokenizer_config.json form), each recorded pre-tokenizer regex (Qwen2/3 and Qwen3.5), and small
byte-level and character-level BPEs trained here with `tokenizers` that exercise every
normalizer, pre-tokenizer behaviour, added-token flag and model option we support. Each one
encodes several hundred generated texts (tokenizer_corpus.py) with and without special-token
parsing, and decodes HF's ids plus random id sequences with and without skip_special.
"""
import json
import os
import random
import subprocess
from pathlib import Path

import pytest

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers  # noqa: E402
from tokenizers import pre_tokenizers, trainers  # noqa: E402

import tokenizer_corpus  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
QWEN_DIR = DATA / "tokenizer-qwen2-qwen3"
QWEN35_CONFIG = DATA / "tokenizer-qwen3.5-metadata" / "tokenizer_config.finetune-mirror.json"
CHATML = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


@pytest.fixture(scope="module")
def cherenkov_bin():
    path = os.environ.get("CHERENKOV_BIN")
    if not path or not Path(path).exists():
        pytest.skip("CHERENKOV_BIN is not set to a built cherenkov binary")
    return path


def run_batch(binary, command, model_dir, lines, *flags):
    """Runs `cherenkov COMMAND MODEL --batch-jsonl FILE` and returns the parsed output lines."""
    batch = Path(model_dir) / f"batch-{command}.jsonl"
    batch.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    result = subprocess.run([binary, command, str(model_dir), "--batch-jsonl", str(batch), *flags],
                            capture_output=True, timeout=600)
    assert result.returncode == 0, result.stderr.decode("utf-8", "replace")
    # Split on b"\n" only: JSON output may hold raw U+2028 or U+0085, which splitlines() cuts at.
    out = [json.loads(line) for line in result.stdout.split(b"\n")[:-1]]
    assert len(out) == len(lines)
    return out


# ---------------------------------------------------------------- tokenizers under test


def recorded_qwen2_regex():
    skeleton = json.loads((QWEN_DIR / "tokenizer.json.without-vocab-merges.json").read_text())
    return skeleton["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]


def recorded_qwen35_regex():
    return json.loads(QWEN35_CONFIG.read_text())["pretokenize_regex"]


def read_merges():
    merges = []
    for index, line in enumerate((QWEN_DIR / "merges.txt").read_text(encoding="utf-8").split("\n")):
        line = line.strip()
        if (index == 0 and line.startswith("#version:")) or not line:
            continue
        merges.append(tuple(line.split()))
    return merges


def qwen_tokenizer_json(regex):
    skeleton = json.loads((QWEN_DIR / "tokenizer.json.without-vocab-merges.json").read_text())
    skeleton["model"]["vocab"] = json.loads((QWEN_DIR / "vocab.json").read_text(encoding="utf-8"))
    skeleton["model"]["merges"] = [list(pair) for pair in read_merges()]
    skeleton["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = regex
    return json.dumps(skeleton, ensure_ascii=False)


def added_token(entry):
    special = entry.get("special", False)
    return AddedToken(entry["content"], single_word=entry.get("single_word", False),
                      lstrip=entry.get("lstrip", False), rstrip=entry.get("rstrip", False),
                      normalized=entry.get("normalized", not special), special=special)


def hf_from_vocab_and_merges(regex, config):
    """What transformers' Qwen2Tokenizer + Qwen2Converter build from vocab.json + merges.txt."""
    vocab = json.loads((QWEN_DIR / "vocab.json").read_text(encoding="utf-8"))
    tok = Tokenizer(models.BPE(vocab=vocab, merges=read_merges(), dropout=None, unk_token=None,
                               continuing_subword_prefix="", end_of_word_suffix="",
                               fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=config.get("add_prefix_space", False), use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    entries = sorted(config["added_tokens_decoder"].items(), key=lambda item: int(item[0]))
    run, special = [], None
    for _, entry in entries + [(None, None)]:
        if entry is None or (run and entry.get("special", False) != special):
            (tok.add_special_tokens if special else tok.add_tokens)(run)
            run = []
        if entry is not None:
            special = entry.get("special", False)
            run.append(added_token(entry))
    return tok


def training_texts():
    texts = tokenizer_corpus.generate(seed=99)
    return texts * 3


def train(model, normalizer, pre_tokenizer, decoder, special_tokens, trainer_options=None,
          byte_level=True):
    tok = Tokenizer(model)
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    if decoder is not None:
        tok.decoder = decoder
    options = dict(vocab_size=1500, show_progress=False, special_tokens=special_tokens)
    if byte_level:
        options["initial_alphabet"] = pre_tokenizers.ByteLevel.alphabet()
    options.update(trainer_options or {})
    tok.train_from_iterator(training_texts(), trainers.BpeTrainer(**options))
    return tok


FLAGGED_TOKENS = [
    AddedToken("[LS]", lstrip=True, normalized=False),
    AddedToken("[RS]", rstrip=True, normalized=False),
    AddedToken("word", single_word=True, normalized=True),
    AddedToken("Ｆｕｌｌ", normalized=True),
    AddedToken("élan", normalized=True),
    AddedToken("<mask>", lstrip=True, rstrip=True, normalized=False, special=True),
    AddedToken(" spaced ", normalized=False),
]


def byte_level_nfkc():
    tok = train(models.BPE(), normalizers.NFKC(), pre_tokenizers.ByteLevel(add_prefix_space=True),
                decoders.ByteLevel(), CHATML)
    tok.add_tokens(FLAGGED_TOKENS)
    return tok.to_str()


def with_model_edit(edit):
    document = json.loads(byte_level_nfkc())
    edit(document["model"])
    return json.dumps(document)


def legacy_merges(model):
    model["merges"] = [" ".join(pair) for pair in model["merges"]]


def split_behaviors():
    tok = train(models.BPE(), normalizers.NFD(), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\s+"), behavior="removed"),
        pre_tokenizers.Split(Regex(r"\d+"), behavior="merged_with_previous"),
        pre_tokenizers.Split("-", behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"\p{Lu}"), behavior="contiguous", invert=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ]), decoders.ByteLevel(), CHATML)
    return tok.to_str()


def split_inverted():
    tok = train(models.BPE(), normalizers.Sequence([normalizers.NFD(), normalizers.NFC()]),
                pre_tokenizers.Sequence([
                    pre_tokenizers.Split(Regex(r"^\s+|\s+$"), behavior="removed"),
                    pre_tokenizers.Split(Regex(r"\p{L}+"), behavior="merged_with_next", invert=True),
                    pre_tokenizers.Split(Regex(r"\p{N}"), behavior="contiguous"),
                    pre_tokenizers.Split(Regex(r"z*"), behavior="isolated"),
                    pre_tokenizers.Split(Regex(r"(?=x)"), behavior="merged_with_previous", invert=True),
                    pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
                ]), decoders.ByteLevel(), CHATML)
    return tok.to_str()


def byte_level_twice():
    # A step after ByteLevel sees the byte-level alphabet, so the mapping cannot be deferred.
    tok = train(models.BPE(), None, pre_tokenizers.Sequence([
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        pre_tokenizers.Split(Regex("Ġ"), behavior="merged_with_next"),
    ]), decoders.ByteLevel(), CHATML)
    return tok.to_str()


def no_decoder():
    tok = train(models.BPE(), normalizers.NFKD(), pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(recorded_qwen2_regex()), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ]), None, CHATML)
    return tok.to_str()


def chars_bpe(fuse_unk):
    model = models.BPE(unk_token="[UNK]", continuing_subword_prefix="##", end_of_word_suffix="</w>",
                       fuse_unk=fuse_unk)
    tok = train(model, normalizers.NFC(), pre_tokenizers.Split(Regex(r"\s+"), behavior="removed"),
                None, ["[UNK]"] + CHATML,
                dict(continuing_subword_prefix="##", end_of_word_suffix="</w>", limit_alphabet=300),
                byte_level=False)
    return tok.to_str()


def byte_fallback():
    tok = train(models.BPE(), normalizers.NFC(), pre_tokenizers.Split(Regex(r"\s+"), behavior="isolated"),
                None, CHATML, dict(limit_alphabet=200), byte_level=False)
    document = json.loads(tok.to_str())
    vocab = document["model"]["vocab"]
    next_id = max(vocab.values()) + 1
    for byte in range(256):
        vocab[f"<0x{byte:02X}>"] = next_id + byte
    document["model"]["byte_fallback"] = True
    # Added tokens must keep their ids after the model vocabulary grew: re-add them at the end.
    for offset, token in enumerate(document["added_tokens"]):
        if token["content"] not in vocab:
            token["id"] = next_id + 256 + offset
    return json.dumps(document)


TRAINED = {
    "bytelevel_nfkc_flags": byte_level_nfkc,
    "legacy_merges": lambda: with_model_edit(legacy_merges),
    "ignore_merges": lambda: with_model_edit(lambda model: model.update(ignore_merges=True)),
    "split_behaviors": split_behaviors,
    "split_inverted_empty_matches": split_inverted,
    "byte_level_then_split": byte_level_twice,
    "no_decoder_nfkd": no_decoder,
    "chars_unk_fused": lambda: chars_bpe(True),
    "chars_unk_unfused": lambda: chars_bpe(False),
    "byte_fallback": byte_fallback,
}

QWEN = ["qwen3_tokenizer_json", "qwen35_regex_tokenizer_json", "qwen2_vocab_merges",
        "qwen35_regex_vocab_merges", "qwen2_vocab_merges_flagged_config"]

# Extra tokenizer_config.json added tokens (ids after Qwen3's) using every flag; the one without
# "normalized" takes transformers' default (not special).
FLAGGED_CONFIG_TOKENS = {
    "151669": {"content": "<lstrip>", "lstrip": True, "normalized": False, "special": True},
    "151670": {"content": "<rstrip>", "rstrip": True, "normalized": False, "special": False},
    "151671": {"content": "wordy", "single_word": True, "normalized": True, "special": False},
    "151672": {"content": "cafe\u0301", "normalized": True, "special": False},
    "151673": {"content": "<both>", "lstrip": True, "rstrip": True, "special": True},
}


def build(name, directory):
    """Writes tokenizer `name` into `directory` and returns the HF tokenizer for it."""
    config = json.loads((QWEN_DIR / "tokenizer_config.json").read_text(encoding="utf-8"))
    if name in ("qwen3_tokenizer_json", "qwen35_regex_tokenizer_json"):
        regex = recorded_qwen2_regex() if name == "qwen3_tokenizer_json" else recorded_qwen35_regex()
        text = qwen_tokenizer_json(regex)
        (directory / "tokenizer.json").write_text(text, encoding="utf-8")
        (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        return Tokenizer.from_str(text)
    if name in ("qwen2_vocab_merges", "qwen35_regex_vocab_merges", "qwen2_vocab_merges_flagged_config"):
        for file in ("vocab.json", "merges.txt"):
            (directory / file).write_bytes((QWEN_DIR / file).read_bytes())
        regex = recorded_qwen2_regex()
        if name == "qwen35_regex_vocab_merges":
            regex = config["pretokenize_regex"] = recorded_qwen35_regex()
        if name == "qwen2_vocab_merges_flagged_config":
            config["added_tokens_decoder"].update(FLAGGED_CONFIG_TOKENS)
        (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        return hf_from_vocab_and_merges(regex, config)
    text = TRAINED[name]()
    (directory / "tokenizer.json").write_text(text, encoding="utf-8")
    return Tokenizer.from_str(text)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            directory = tmp_path_factory.mktemp(name)
            cache[name] = (directory, build(name, directory))
        return cache[name]
    return get


def added_contents(hf):
    return sorted(token.content for token in hf.get_added_tokens_decoder().values())


def first_mismatches(texts, ours, theirs, limit=5):
    bad = [(text, mine, reference) for text, mine, reference in zip(texts, ours, theirs) if mine != reference]
    return len(bad), bad[:limit]


# ---------------------------------------------------------------- the comparisons


@pytest.mark.parametrize("name", QWEN + sorted(TRAINED))
def test_encode_matches_hf(cherenkov_bin, built, name):
    directory, hf = built(name)
    texts = tokenizer_corpus.generate(seed=2024, added_tokens=added_contents(hf))
    assert len(texts) >= 700
    theirs = [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]
    ours = run_batch(cherenkov_bin, "tokenize", directory, texts)
    count, examples = first_mismatches(texts, ours, theirs)
    assert count == 0, f"{count} of {len(texts)} texts differ, e.g. {examples}"

    hf.encode_special_tokens = True
    try:
        theirs_plain = [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]
    finally:
        hf.encode_special_tokens = False
    ours_plain = run_batch(cherenkov_bin, "tokenize", directory, texts, "--no-special")
    count, examples = first_mismatches(texts, ours_plain, theirs_plain)
    assert count == 0, f"--no-special: {count} of {len(texts)} texts differ, e.g. {examples}"


@pytest.mark.parametrize("name", QWEN[:1] + sorted(TRAINED))
def test_decode_matches_hf(cherenkov_bin, built, name):
    directory, hf = built(name)
    texts = tokenizer_corpus.generate(seed=7, added_tokens=added_contents(hf))
    sequences = [encoding.ids for encoding in hf.encode_batch(texts, add_special_tokens=False)]
    rng = random.Random(11)
    known = sorted(hf.get_vocab(with_added_tokens=True).values())
    sequences += [[rng.choice(known) for _ in range(rng.randint(0, 12))] for _ in range(300)]
    for skip_special in (False, True):
        theirs = hf.decode_batch(sequences, skip_special_tokens=skip_special)
        flags = ["--skip-special"] if skip_special else []
        ours = run_batch(cherenkov_bin, "detokenize", directory, sequences, *flags)
        count, examples = first_mismatches(sequences, ours, theirs)
        assert count == 0, f"skip_special={skip_special}: {count} differ, e.g. {examples}"


def test_json_output_lists_ids_and_vocabulary_pieces(cherenkov_bin, built):
    directory, hf = built("bytelevel_nfkc_flags")
    for text in ["Hello wörld <|im_start|> [LS]  x", "日本語 😀 '''", "  word word"]:
        result = subprocess.run([cherenkov_bin, "tokenize", str(directory), text, "--json"],
                                capture_output=True, check=True)
        report = json.loads(result.stdout)
        ids = hf.encode(text, add_special_tokens=False).ids
        assert report["ids"] == ids
        assert report["tokens"] == [hf.id_to_token(token_id) for token_id in ids]


def test_text_output_has_ids_line_then_one_line_per_token(cherenkov_bin, built):
    directory, hf = built("qwen3_tokenizer_json")
    text = "Hi\tthere\n"
    result = subprocess.run([cherenkov_bin, "tokenize", str(directory), text],
                            capture_output=True, check=True, text=True)
    lines = result.stdout.split("\n")
    ids = hf.encode(text, add_special_tokens=False).ids
    assert lines[0] == " ".join(map(str, ids))
    assert [int(line.split("\t")[0]) for line in lines[1:-1]] == ids


def test_detokenize_prints_the_text(cherenkov_bin, built):
    directory, hf = built("qwen3_tokenizer_json")
    text = "Ünïcödé 😀 <|im_end|> done"
    ids = hf.encode(text, add_special_tokens=False).ids
    argument = ",".join(map(str, ids[:3])) + " " + " ".join(map(str, ids[3:]))
    result = subprocess.run([cherenkov_bin, "detokenize", str(directory), *argument.split(" ")],
                            capture_output=True, check=True)
    assert result.stdout.decode("utf-8") == hf.decode(ids, skip_special_tokens=False)


def test_detokenize_rejects_an_unknown_id(cherenkov_bin, built):
    directory, hf = built("qwen3_tokenizer_json")
    result = subprocess.run([cherenkov_bin, "detokenize", str(directory), "1,2,999999"],
                            capture_output=True, text=True)
    assert result.returncode == 1
    assert "999999" in result.stderr


def test_tokenize_rejects_invalid_utf8_naming_the_byte(cherenkov_bin, built):
    directory, _ = built("qwen3_tokenizer_json")
    result = subprocess.run([cherenkov_bin, "tokenize", str(directory), b"ok \xff\xfe"],
                            capture_output=True)
    assert result.returncode == 1
    assert b"not valid UTF-8 at byte 3" in result.stderr


def test_malformed_tokenizer_json_names_file_and_field(cherenkov_bin, tmp_path):
    document = json.loads(byte_level_nfkc())
    document["pre_tokenizer"] = {"type": "Whitespace"}
    (tmp_path / "tokenizer.json").write_text(json.dumps(document))
    result = subprocess.run([cherenkov_bin, "tokenize", str(tmp_path), "x"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "tokenizer.json" in result.stderr and "pre_tokenizer.type" in result.stderr
