// Developer switches for A/B runs of the engine's fast paths (`--tuning key=value`): one typed
// struct, parsed once at the CLI edge and carried through LoadOptions into the backends. The
// defaults are the product; every other value exists to measure what a path buys, so results
// must not depend on it beyond speed (tests run the modes side by side and compare bits).
// docs/cuda-backend.md ("Tuning") has the table of keys.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::engine {

struct Tuning {
    // CUDA graphs for decode calls; off: every kernel launched one by one (host-bound steps).
    bool cuda_graphs = true;
    // One graph per whole decode step once every layer is routed on the device; off: one graph
    // per layer segment only (needs cuda_graphs).
    bool step_graphs = true;
    // Layers whose experts are all resident routed on the device with no host round trip; off:
    // every layer reads its routing back (one sync per layer).
    bool device_routing = true;
    // Independent projections and the next layer's router on side streams; off: one stream.
    bool side_streams = true;
    // Programmatic dependent launch (sm_90) for decode-sized calls; off: each kernel waits for
    // the previous one to end before it starts (no overlap of ramps and tails).
    bool launch_overlap = true;
    // Prefill GEMMs of the shapes the tensor-core kernel decodes on the tensor cores; off: the
    // SIMT float32 kernel for every shape (slower, more exact).
    bool gemm_mma = true;
    // Decode GEMV on the bf16 tensor cores where the shape allows; off: the FMA kernels for
    // every shape the Hopper kernels do not take (the pre-Hopper speed of the FMA path).
    bool gemv_mma = true;
    // Hopper: decode GEMV with each block's weights copied whole into shared memory; off: the
    // register-pipelined tensor-core kernel (same bits, less in flight).
    bool gemv_bulk = true;
    // Hopper: short dense matrices cut over the blocks of a cluster so every multiprocessor gets
    // work; off: one block per row set (idle multiprocessors on [320, 10240]).
    bool gemv_slices = true;
    // Hopper, Q4 group-64 experts: a decode layer's routed experts in one launch on the integer
    // tensor cores; off: the two bulk launches (other bits; H200: 912 against 688 µs a token).
    bool expert_layer = true;
    // CUDA: buffered expert reads fill the host pool with non-temporal stores (the device copies
    // them by DMA, the CPU never reads them); off: plain copies through the CPU caches.
    bool nt_fill = true;
    // The CPU's int8-activation matmuls (--cpu-activations q8: the CPU backend and the CUDA
    // path's CPU experts) on AVX-512 VNNI where the CPU has it; off: the AVX2 kernels (same bits).
    bool cpu_avx512 = true;
    // Expert reads cut into pieces of this many KiB, so one record's read overlaps its copy;
    // 0: whole records (one request each). -1: the expert cache's default (512 KiB).
    int64_t io_piece_kib = -1;
    // CUDA decode with the table mapped (--host-pool-gb mapped): up to this many of the next
    // layer's predicted experts that the device pool lacks are copied into it behind the layer's
    // misses, while the copy engine would otherwise idle through the next layer's mixer; 0: none.
    int64_t next_layer_copies = 2;

    bool operator==(const Tuning&) const = default;
};

// Applies one `key=value` setting. Booleans take on/off, true/false or 1/0; io_piece_kib a
// whole number of KiB, 0-1048576; next_layer_copies a whole number of experts, 0-64. Throws InvalidInput naming the setting and the key for an
// unknown key, a missing '=' or a bad value (the message lists the keys).
void apply_tuning(Tuning& tuning, std::string_view setting);

// The defaults with every setting applied in order (a later one overrides an earlier one).
Tuning parse_tuning(std::span<const std::string> settings);

// The settings that differ from the defaults, as `key=value` strings in the table's order
// (empty for the defaults): for logs and statistics, and parse_tuning's inverse.
std::vector<std::string> tuning_settings(const Tuning& tuning);

// Every key, in the table's order.
std::span<const std::string_view> tuning_keys();

}  // namespace cherenkov::engine
