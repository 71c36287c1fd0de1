#!/usr/bin/env bash
# Fetches the llama.cpp source the peer benchmark builds (bench/peers/llama_cpp.sh) on a machine
# with network access, into .peers/ of the repository (ignored by git; `run`'s carry takes it to
# a GPU machine without network). llama.cpp with the qwen4exp architecture and its converter
# (conversion/qwen4exp.py) is vendored in llama-cpp-python's source distribution on PyPI; the
# archive is checked against its pinned SHA-256, and only llama.cpp's build and conversion files
# are kept (models/ and docs/ are dropped: 176 MB to about 5 MB as tar.xz). Idempotent.
#   bench/peers/fetch_llama_cpp.sh
set -euo pipefail
version=0.3.36
sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
repo=$(cd "$(dirname "$0")/../.." && pwd)
out="$repo/.peers/llama.cpp-$version.tar.xz"
if [[ -f "$out" ]]; then
    echo "$out"
    exit 0
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-binary :all: --no-deps "llama-cpp-python==$version" -d "$work"
archive="$work/llama_cpp_python-$version.tar.gz"
echo "$sha256  $archive" | sha256sum --check --quiet
tar xzf "$archive" -C "$work"
src="$work/llama_cpp_python-$version/vendor/llama.cpp"
rm -rf "${src:?}/models" "${src:?}/docs" "${src:?}/media" "${src:?}/benches"
mkdir -p "$repo/.peers"
tar cJf "$out.tmp" -C "$src/.." llama.cpp
mv "$out.tmp" "$out"
echo "$out"
