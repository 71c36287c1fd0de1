"""The benchmark suite behind scripts/bench-suite (docs/benchmarks.md): fresh-process samples of
`cherenkov MODEL 'prompt'`, reports, the gallery, resume, and the paired prefill comparison.
Standard library only, so it runs wherever the binary does."""
