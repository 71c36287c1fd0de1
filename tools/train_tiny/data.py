"""Corpus, split, tokenizer and token streams (no torch).

The corpus is Python source that is installed on the machine: the CPython standard library
(PSF-2.0) and the Python files of a few BSD-licensed scientific packages. Every file is one
document; documents are joined with <|endoftext|>. A fixed 2 % of files (by a hash of their
path) is held out. A byte-level BPE tokenizer with the fixture tokenizer's exact pipeline
(tools/fixtures/tok.py) and the ChatML special tokens is trained on the training split.

A small share of chat data is derived from the training files: for a function with a
docstring, `<|im_start|>user\nWrite a Python function `name(args)`: <docstring line><|im_end|>\n
<|im_start|>assistant\n```python\n<its source>\n```<|im_end|>\n` (the chat template's rendering).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata as md
import importlib.util
import multiprocessing as mp
import os
import sysconfig

import numpy as np

from fixtures import tok

SPECIALS = tok.SPECIALS  # <|endoftext|>, <|im_start|>, <|im_end|> = ids 0, 1, 2

# import name -> distribution name; all permissive (checked against the metadata at run time)
PACKAGES = {
    "numpy": "numpy",
    "scipy": "scipy",
    "sympy": "sympy",
    "networkx": "networkx",
    "pandas": "pandas",
    "sklearn": "scikit-learn",
}
PERMISSIVE = ("BSD", "PSF", "Python Software Foundation", "MIT", "Apache")
MAX_FILE_BYTES = 400_000
HELDOUT_PERCENT = 2


def _license(dist: str) -> dict:
    m = md.metadata(dist)
    lic = {"distribution": dist, "version": m.get("Version")}
    if m.get("License-Expression"):
        lic["License-Expression"] = m.get("License-Expression")
    if m.get("License"):
        lic["License"] = m.get("License").splitlines()[0][:120]
    cls = [c for c in (m.get_all("Classifier") or []) if c.startswith("License ::")]
    if cls:
        lic["classifiers"] = cls
    return lic


def sources(names):
    """[(label, root dir, license dict)] for the requested sources ('stdlib' or import names)."""
    out = []
    for n in names:
        if n == "stdlib":
            root = sysconfig.get_paths()["stdlib"]
            out.append(("stdlib", root, {"distribution": "CPython standard library", "version": sysconfig.get_python_version(),
                                          "License": "PSF-2.0 (Python Software Foundation License Version 2)"}))
            continue
        spec = importlib.util.find_spec(n)
        if spec is None or not spec.submodule_search_locations:
            print(f"source {n}: not installed, skipped", flush=True)
            continue
        lic = _license(PACKAGES[n])
        text = " ".join(str(v) for v in lic.values())
        if not any(p in text for p in PERMISSIVE):
            raise SystemExit(f"{n}: license not recognised as permissive: {lic}")
        out.append((n, list(spec.submodule_search_locations)[0], lic))
    return out


def list_files(srcs):
    """Sorted [(label, relpath, abspath)] of .py files (stdlib: not site-/dist-packages)."""
    files = []
    for label, root, _ in srcs:
        for dp, dns, fns in os.walk(root):
            dns[:] = sorted(d for d in dns if d not in ("site-packages", "dist-packages", "__pycache__"))
            for fn in sorted(fns):
                if fn.endswith(".py"):
                    p = os.path.join(dp, fn)
                    files.append((label, os.path.relpath(p, root), p))
    return sorted(files)


def is_heldout(label: str, rel: str) -> bool:
    h = hashlib.sha256(f"{label}/{rel}".encode()).digest()
    return int.from_bytes(h[:4], "little") % 100 < HELDOUT_PERCENT


def read_text(path):
    try:
        b = open(path, "rb").read()
    except OSError:
        return None
    if not b.strip() or len(b) > MAX_FILE_BYTES:
        return None
    try:
        t = b.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any(s in t for s in SPECIALS):
        return None
    return t.replace("\r\n", "\n")


def _chat_samples_of(args):
    text, max_per_file = args
    if '"""' not in text:
        return []
    lines = text.split("\n")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name.startswith("_"):
            continue
        doc = ast.get_docstring(node)
        if not doc:
            continue
        line = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
        if not (20 <= len(line) <= 200):
            continue
        if node.end_lineno - node.lineno > 60:
            continue
        col = node.col_offset
        seg = lines[node.lineno - 1 : node.end_lineno]
        if any(ln[:col].strip() for ln in seg):
            continue
        src = "\n".join(ln[col:] for ln in seg).rstrip()
        if not src or len(src) > 1500 or "\t" in src:
            continue
        try:
            args = ast.unparse(node.args)
        except Exception:
            continue
        out.append(chat_text([("user", f"Write a Python function `{node.name}({args})`: {line}"),
                              ("assistant", f"```python\n{src}\n```")]))
        if len(out) >= max_per_file:
            break
    return out


def chat_text(messages):
    """What chat_template.jinja renders (no generation prompt)."""
    return "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in messages)


CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def build(source_names, workers=8, max_chat=40000, tokenizer_sample_bytes=60_000_000, vocab_size=4096, log=print):
    """Returns a dict: tokenizer (tokenizers.Tokenizer), train/heldout token arrays (uint16,
    documents joined by <|endoftext|>), heldout documents, and the record of what was used."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    srcs = sources(source_names)
    files = list_files(srcs)
    rec = {"sources": {}, "heldout_percent": HELDOUT_PERCENT, "max_file_bytes": MAX_FILE_BYTES}
    train_docs, held_docs = [], []
    for label, root, lic in srcs:
        rec["sources"][label] = {"root": root, "license": lic, "files_seen": 0, "files_used": 0, "bytes_used": 0,
                                 "train_files": 0, "heldout_files": 0}
    with mp.Pool(workers) as pool:
        texts = pool.map(read_text, [f[2] for f in files], chunksize=64)
    for (label, rel, path), t in zip(files, texts):
        r = rec["sources"][label]
        r["files_seen"] += 1
        if t is None:
            continue
        r["files_used"] += 1
        r["bytes_used"] += len(t.encode())
        if is_heldout(label, rel):
            r["heldout_files"] += 1
            held_docs.append((label, rel, t))
        else:
            r["train_files"] += 1
            train_docs.append((label, rel, t))
    log(f"corpus: {len(train_docs)} train files, {len(held_docs)} held-out files, "
        f"{sum(len(d[2]) for d in train_docs) / 1e6:.1f} M chars train")

    # chat samples from training files only
    with mp.Pool(workers) as pool:
        per_file = pool.map(_chat_samples_of, [(d[2], 6) for d in train_docs], chunksize=16)
    chats = [c for lst in per_file for c in lst]
    rng = np.random.default_rng(1234)
    if len(chats) > max_chat:
        keep = np.sort(rng.choice(len(chats), max_chat, replace=False))
        chats = [chats[i] for i in keep]
    rec["chat_samples"] = len(chats)
    log(f"chat samples: {len(chats)}")

    # tokenizer: the fixture tokenizer's pipeline, trained on (a deterministic sample of) the training split
    tk = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tk.decoder = decoders.ByteLevel()
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    order = rng.permutation(len(train_docs))
    sample, nbytes = [], 0
    for i in order:
        if nbytes >= tokenizer_sample_bytes:
            break
        sample.append(train_docs[i][2])
        nbytes += len(train_docs[i][2])
    sample.sort()
    tk.train_from_iterator(sample, trainer=trainer, length=len(sample))
    for i, s in enumerate(SPECIALS):
        assert tk.token_to_id(s) == i, (s, tk.token_to_id(s))
    rec["tokenizer"] = {"vocab_size": tk.get_vocab_size(), "trained_on_chars": nbytes, "trained_on_files": len(sample)}
    log(f"tokenizer: vocab {tk.get_vocab_size()} from {nbytes / 1e6:.1f} M chars")

    def stream(texts):
        enc = tk.encode_batch(texts, add_special_tokens=False)
        n = sum(len(e.ids) for e in enc) + len(enc)
        out = np.empty(n, dtype=np.uint16)
        p = 0
        for e in enc:
            out[p : p + len(e.ids)] = e.ids
            p += len(e.ids)
            out[p] = 0  # <|endoftext|>
            p += 1
        return out

    train = stream([d[2] for d in train_docs] + chats)
    held = stream([d[2] for d in held_docs])
    code_chars = sum(len(d[2]) for d in train_docs)
    rec["tokens"] = {"train": int(train.size), "heldout": int(held.size),
                     "chars_per_token_train": round((code_chars + sum(map(len, chats))) / max(1, train.size), 3)}
    log(f"tokens: train {train.size / 1e6:.2f} M, held-out {held.size / 1e6:.3f} M")
    return {"tokenizer": tk, "train": train, "heldout": held, "heldout_docs": held_docs, "record": rec}
