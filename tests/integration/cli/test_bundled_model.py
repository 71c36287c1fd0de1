"""The bundled quick-start model is what its generator writes, and `inspect` describes it."""
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
BUNDLED = REPO / "models" / "tiny-random"


def test_bundled_model_regenerates_byte_for_byte(tmp_path):
    subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_checkpoint.py"), str(tmp_path), "--mtp", "--shards", "2"],
                   check=True)
    generated = sorted(p.name for p in tmp_path.iterdir())
    bundled = sorted(p.name for p in BUNDLED.iterdir() if p.name != "README.md")
    assert generated == bundled
    for name in generated:
        assert (tmp_path / name).read_bytes() == (BUNDLED / name).read_bytes(), name


def test_quick_start_inspects_the_bundled_model(run_cli):
    text = run_cli("inspect", BUNDLED).stdout
    assert "qwen4_exp" in text and "preparation: supported" in text
    report = json.loads(run_cli("inspect", BUNDLED, "--json").stdout)
    assert report["qwen4_exp"]["layout"]["mtp"]["present"] is True
