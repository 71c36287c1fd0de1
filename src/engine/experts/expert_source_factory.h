// Builds the ExpertSource the engine runs with: the bounded expert cache, the DirectExpertReader
// when the pool is 0, or the MappedExpertTable when the table is used in place. Resolves
// the pool setting against the tables and available memory, and finds a store's expert tables by
// precision.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "engine/experts/expert_cache_options.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/pool_budget.h"
#include "store/manifest/store_manifest.h"

namespace cherenkov::engine {

struct ExpertSourceOptions {
    // Tables, precisions, policy, IO, lookahead, cut_weak. cache.n_slots is set from `pool`.
    ExpertCacheOptions cache;
    // --pool-gb (cpu) or --host-pool-gb (cuda). Mapped: no cache, the resident table is mapped
    // and its records used in place (MappedExpertTable). Staging: four layer-steps of records
    // (the host side of a device pool).
    PoolSetting pool;
    int64_t max_rows = 1;        // rows per step: the token plus drafts
    int64_t top_k = 1;           // experts per row
    uint64_t fixed_bytes = 0;    // buffers allocated outside the pool (adaptive sizing)
    uint64_t reserve_bytes = 0;  // scratch allowance left outside the pool (adaptive sizing)
    uint64_t min_headroom_bytes = 6'000'000'000;
    MemorySources memory;  // real /proc and cgroup files unless a test overrides them
};

struct BuiltExpertSource {
    std::unique_ptr<ExpertSource> source;
    PoolBudget budget;  // what the pool resolved to (n_slots 0: DirectExpertReader)
};

// Throws InvalidInput for an infeasible explicit pool (naming the smallest workable value),
// ResourceExhausted when adaptive sizing cannot fit one layer-step, and whatever opening the
// tables throws. A pool of 0 gives a DirectExpertReader over the resident table; a Mapped pool a
// MappedExpertTable over it (InvalidInput with a different miss precision: mixed mode reads
// unpredicted misses at low bits, and a mapped table has no misses to read).
BuiltExpertSource make_expert_source(ExpertSourceOptions options);

// The expert tables of a store directory for the given precisions: experts.bin from manifest.json
// for 4, experts{3,2}.bin from manifest{3,2}.json. Throws NotFound naming a missing table (build
// it with `cherenkov prepare STORE_DIR --experts 3,2`; LoadedModel builds it before this).
ExpertTables find_expert_tables(const std::string& store_dir, std::span<const int> bits);
// The same with the store's manifest.json parsed already (experts.bin's layout comes from it).
ExpertTables find_expert_tables(const std::string& store_dir, std::span<const int> bits,
                                const store::StoreManifest& base);

}  // namespace cherenkov::engine
