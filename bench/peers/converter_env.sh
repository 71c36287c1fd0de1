#!/usr/bin/env bash
# Prints the path of a Python that can run llama.cpp's converter (convert_hf_to_gguf.py), making
# one first when needed. The converter imports PyTorch 2.x (it names torch.float8_e4m3fn at import)
# beside transformers, safetensors and numpy. When the current python3 has all of them it is used
# as it is; otherwise a virtual environment that sees the system's site-packages (transformers,
# numpy, ...) gets PyTorch from PyPI. The PyPI wheel for Linux pulls NVIDIA's CUDA runtime wheels
# (a few GB; they are needed at import even on a machine without a GPU), so the environment lives
# under /tmp, never in the system Python. Idempotent: a working environment is reused.
#   bench/peers/converter_env.sh [VENV_DIR]      (default: ${TMPDIR:-/tmp}/cherenkov-converter-venv)
set -euo pipefail
venv=${1:-${TMPDIR:-/tmp}/cherenkov-converter-venv}
check='import torch, transformers, safetensors, numpy; torch.float8_e4m3fn'
if python3 -c "$check" 2>/dev/null; then
    command -v python3
    exit 0
fi
if [[ -x "$venv/bin/python" ]] && "$venv/bin/python" -c "$check" 2>/dev/null; then
    echo "$venv/bin/python"
    exit 0
fi
TRANSFORMERS_VERBOSITY=error python3 -c 'import transformers, safetensors, numpy' ||
    { echo "converter_env.sh: python3 needs transformers, safetensors and numpy" >&2; exit 1; }
echo "converter_env.sh: installing PyTorch from PyPI into $venv (a few GB)" >&2
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --no-cache-dir "torch>=2.1" >&2
"$venv/bin/python" -c "$check" ||
    { echo "converter_env.sh: PyTorch in $venv does not import" >&2; exit 1; }
echo "$venv/bin/python"
