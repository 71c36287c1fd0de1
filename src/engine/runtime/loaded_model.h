// Everything needed to run one packed store on the CPU, loaded together: the resident weights,
// the expert source for the chosen precision, the thread pool and the Model. Commands (run,
// logits, perplexity, bench; later serve) share this instead of wiring the parts themselves.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "engine/cpu/thread_pool.h"
#include "engine/experts/expert_source.h"
#include "engine/model/model.h"
#include "engine/model/model_weights.h"

namespace cherenkov::engine {

struct LoadOptions {
    std::string store_dir;
    int expert_bits = 4;  // 4, 3 or 2: which expert table serves routed experts
    int miss_bits = 0;    // --miss-experts: precision of unpredicted misses (0: expert_bits)
    int threads = 0;      // 0: every online CPU
    std::string pool = "adaptive";  // --pool-gb: N (decimal GB), max, adaptive; 0: no cache
    std::string policy = "lru";     // --cache-policy: lru or frequency
    float cut_weak = 0.0F;          // --cut-weak
    int io_threads = 4;
    int64_t max_rows = 3;  // rows per decode step (token + drafts): the pool's minimum
};

class LoadedModel {
public:
    // Validates the store (manifest, sizes) and maps it. Throws InvalidInput when `store_dir`
    // is a checkpoint rather than a store (naming the prepare command), NotFound for a missing
    // low-bit table, Corrupt for a damaged store.
    static std::unique_ptr<LoadedModel> load(const LoadOptions& options);

    Model& model() { return *model_; }
    const ModelWeights& weights() const { return *weights_; }
    ExpertSource& experts() { return *experts_; }
    ThreadPool& pool() { return *pool_; }
    double load_seconds() const { return load_seconds_; }
    int expert_bits() const { return expert_bits_; }

    // Bytes read from expert tables so far.
    uint64_t expert_bytes_read() const;
    // The expert cache's counters as JSON (null without a cache).
    nlohmann::json expert_stats() const;
    // One line for logs: how the pool was sized.
    const std::string& pool_description() const { return pool_description_; }

    // The memory_stats object: process RSS and peak, resident weights, mapped n-gram bytes,
    // sequence state, expert reads.
    nlohmann::json memory_stats(const SequenceState* state) const;

private:
    LoadedModel() = default;

    std::unique_ptr<ModelWeights> weights_;
    std::unique_ptr<ExpertSource> experts_;
    std::unique_ptr<ThreadPool> pool_;
    std::unique_ptr<Model> model_;
    double load_seconds_ = 0.0;
    int expert_bits_ = 4;
    uint64_t pool_bytes_ = 0;
    std::string pool_description_;
};

}  // namespace cherenkov::engine
