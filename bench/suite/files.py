"""Published files are written atomically: a temporary file in the same directory, synced, then
renamed over the old one, so a kill at any point leaves the previous version readable."""
import hashlib
import json
import os
import tempfile
from pathlib import Path


def write_atomic(path, data):
    """Writes bytes or text to `path` atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix="." + path.name + ".", suffix=".partial", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_json_atomic(path, value):
    write_atomic(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n")


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            digest.update(chunk)
    return digest.hexdigest()


def sha256_text(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_json(value):
    """The form hashed for signatures: sorted keys, no whitespace, so key order never matters."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
