// Everything needed to run one packed store, loaded together: the resident weights, the expert
// source for the chosen precision, the thread pool and the forward-pass backend (the CPU Model,
// or the CUDA model with its device expert pool). Commands (run, logits, perplexity, bench;
// later serve) share this instead of wiring the parts themselves.
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "engine/cpu/matmul.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/cpu_experts.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/pool_setting.h"
#include "engine/model/model.h"
#include "engine/model/model_weights.h"
#include "engine/model/prefill_quantum.h"
#include "engine/runtime/engine_stats.h"
#include "engine/tuning.h"
#include "store/index/index_options.h"
#include "store/index/resolve_model.h"

namespace cherenkov::engine {

struct LoadOptions {
    std::string store_dir;
    int expert_bits = 4;  // 4, 3 or 2: which expert table serves routed experts
    int miss_bits = 0;    // --miss-experts: precision of unpredicted misses (0: expert_bits)
    int threads = 0;      // 0: every online CPU
    // --cpu-activations: how the CPU's matmuls take activations (engine/cpu/matmul.h); nullopt
    // (auto): F32 for the CPU backend (the reference order), Q8 for the CUDA backend's CPU
    // experts, whose device side already rounds its dense activations to bf16.
    std::optional<ActivationPrecision> cpu_activations;
    // --cpu-experts (cuda): decode misses of the device pool computed on the CPU's threads, with
    // cpu_activations, instead of copied to the device (engine/cuda/cpu_experts.h).
    cuda::CpuExpertsSetting cpu_experts;
    // --pool-gb: N (decimal GB), max, adaptive; 0: no cache; mapped (cpu): the table in place.
    // With cuda it sizes the device expert pool (mapped is then refused).
    PoolSetting pool;
    std::string policy = "lru";  // --cache-policy: lru or frequency
    float cut_weak = 0.0F;       // --cut-weak
    int io_threads = 0;          // expert reads in flight; 0: half the online CPUs, 4 to 8
    int64_t max_rows = 3;        // rows per decode step (token + drafts): the pool's minimum
    // cpu, cuda, or auto (cuda when this build has CUDA and a device is present).
    std::string backend = "cpu";
    // With cuda, `pool` sizes the device expert pool and this the host cache the device pool is
    // filled from (the RAM tier). Staging: a pool of a few layer-steps, so misses of the device
    // pool read the store (through the page cache when buffered_io). Mapped: no host cache, the
    // table is mapped, page-locked and copied from in place (engine/experts/
    // mapped_expert_table.h; needs RAM for the whole table). Not used on the cpu.
    PoolSetting host_pool = PoolSetting::of(PoolMode::Staging);
    bool buffered_io = false;  // read experts through the page cache instead of O_DIRECT
    bool check = false;        // cuda: also run the CPU model and report divergence (slow)
    int64_t max_ctx = 4096;    // context the device memory plan leaves room for
    // --prefill-quantum: the most rows per prefill call, and the scratch the memory plan keeps
    // outside the expert pool for them (engine/model/prefill_quantum.h).
    PrefillQuantum prefill_quantum;
    // false (--drafts 0): the MTP draft head is neither loaded nor allocated, on either backend;
    // the model then has no MTP (has_mtp() false) and generates without speculation.
    bool draft_head = true;
    // Seed `build_missing_store`: an expert table the precisions need that is missing or invalid
    // is built at load (progress through index.events), published the way `prepare --experts N`
    // does. false: loading fails with NotFound naming the prepare command that builds it.
    bool build_missing_store = true;
    // --repack: the low-bit tables the precisions read (--experts 3|2, --miss-experts 3|2) are
    // rebuilt from experts.bin at load and published as build_missing_store publishes them,
    // even when valid. Needs a low-bit precision (validate_load_options).
    bool repack = false;
    // config.json of store_dir when the caller parsed it already (the CLI checks the context
    // against it before loading), so it is not read again; null: load() reads it. Must outlive
    // load().
    const model_data::qwen4_exp::Config* config = nullptr;
    // The index entry store_dir was resolved from (store::resolve_model), or null for a store
    // directory given directly. Tables built at load are then published as a new store of that
    // model, and *resolved names the new store and holds its lease. Must outlive load().
    store::ResolvedModel* resolved = nullptr;
    // Where the index is, progress events and packing threads for tables built at load; also
    // --root for the commands messages suggest.
    store::IndexOptions index;
    // --tuning: A/B switches of the fast paths (engine/tuning.h); the defaults are the product.
    Tuning tuning;
};

// Checks every option that needs no store: precisions (mixed mode reads misses at lower
// precision than Q4 residents, so it needs --experts 4), --cut-weak (a routing weight, 0 to 1),
// threads, rows and context (the prefill quantum is checked when it is made). Throws
// InvalidInput naming the flag. load() calls it first; callers that resolve the model call it
// before resolving.
void validate_load_options(const LoadOptions& options);

// "auto" → "cuda" when the build has CUDA and a device answers, else "cpu"; "cpu"/"cuda" as
// given; anything else throws InvalidInput.
std::string resolve_backend(const std::string& requested);

class LoadedModel {
public:
    // Validates the options and the store (manifest, sizes), builds missing expert tables
    // (build_missing_store) and maps it. Throws InvalidInput for bad options or when
    // `store_dir` is a checkpoint rather than a store (naming the prepare command), NotFound for
    // a missing low-bit table when building is off, Corrupt for a damaged store.
    static std::unique_ptr<LoadedModel> load(const LoadOptions& options);

    // The backend the options chose (with --check, a wrapper running both).
    ModelBackend& model() { return *backend_; }
    Model& cpu_model() { return *model_; }
    const std::string& backend_name() const { return backend_name_; }
    const ModelWeights& weights() const { return *weights_; }
    // The store the model was loaded from (a new one when tables were built at load).
    const std::string& store_dir() const { return weights_->store_dir; }
    ExpertSource& experts() { return *experts_; }
    ThreadPool& pool() { return *pool_; }
    double load_seconds() const { return load_seconds_; }
    int expert_bits() const { return expert_bits_; }
    // --prefill-quantum as given, and the rows per prefill call it comes to on this backend:
    // min(quantum, model().max_rows_per_call()).
    PrefillQuantum prefill_quantum() const { return prefill_quantum_; }
    int64_t prefill_chunk_tokens() const;

    // Bytes read from expert tables so far.
    uint64_t expert_bytes_read() const;
    // One line for logs: how the pool was sized.
    const std::string& pool_description() const { return pool_description_; }

    // One observation of everything the engine counts (engine_stats.h). Call it on the thread
    // that runs the model: the CUDA figures are that thread's. `state` (optional) adds its bytes.
    EngineStats observe(const SequenceState* state) const;
    // The totals every generation on this model adds its prefill chunks to
    // (GenerationOptions::prefill_counters).
    PrefillCounters& prefill_counters() const { return prefill_counters_; }

    // The memory_stats object (memory_json of observe(state)): process RSS and peak, resident
    // weights, mapped n-gram bytes, sequence state, expert reads, the prefill quantum and chunk.
    nlohmann::json memory_stats(const SequenceState* state) const;

private:
    LoadedModel() = default;

    std::unique_ptr<ModelWeights> weights_;
    std::unique_ptr<ExpertSource> experts_;
    std::unique_ptr<ThreadPool> pool_;
    std::unique_ptr<Model> model_;
    std::unique_ptr<ModelBackend> cuda_model_;
    std::unique_ptr<ModelBackend> checked_;
    ModelBackend* backend_ = nullptr;
    std::string backend_name_ = "cpu";
    double load_seconds_ = 0.0;
    int expert_bits_ = 4;
    ActivationPrecision cpu_activations_ = ActivationPrecision::F32;
    PrefillQuantum prefill_quantum_;
    uint64_t pool_bytes_ = 0;
    std::string pool_description_;
    std::chrono::steady_clock::time_point loaded_at_{};
    // Updated by generations through a pointer while the model itself is used as const.
    mutable PrefillCounters prefill_counters_;
};

}  // namespace cherenkov::engine
