// The expert pool's byte budget: a PoolSetting (pool_setting.h) resolved to slots, and the
// adaptive size from available memory (MemAvailable and the cgroup limit). Pure functions over
// injectable file paths, so tests run against fake /proc and cgroup files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "engine/experts/pool_setting.h"

namespace cherenkov::engine {

// Where memory facts come from. Defaults are the real files; tests point them at a temp dir.
// A missing cgroup file means "no such limit".
struct MemorySources {
    std::string meminfo_path = "/proc/meminfo";
    std::string cgroup_v2_max_path = "/sys/fs/cgroup/memory.max";
    std::string cgroup_v2_current_path = "/sys/fs/cgroup/memory.current";
    std::string cgroup_v1_limit_path = "/sys/fs/cgroup/memory/memory.limit_in_bytes";
    std::string cgroup_v1_usage_path = "/sys/fs/cgroup/memory/memory.usage_in_bytes";
};

struct AvailableMemory {
    uint64_t mem_available_bytes = 0;            // /proc/meminfo MemAvailable
    std::optional<uint64_t> cgroup_limit_bytes;  // v2 memory.max or v1 limit_in_bytes, if limited
    uint64_t cgroup_usage_bytes = 0;             // memory.current / usage_in_bytes (0 if absent)

    // What this process may still allocate: MemAvailable, capped by the cgroup's headroom.
    uint64_t usable_bytes() const;
};

// Reads MemAvailable (throws Corrupt naming the file when it is missing or malformed) and the
// cgroup v2 limit, else the v1 limit. "max" and v1's near-2^63 "unlimited" mean no limit.
AvailableMemory read_available_memory(const MemorySources& sources);

struct PoolRequirements {
    uint64_t slot_bytes = 0;       // one slot: the largest record of the tables in use
    uint64_t n_table_records = 0;  // records in the table (layers · experts): `max`
    uint64_t step_records = 0;     // one layer-step's union at most: rows · top-k
    uint64_t fixed_bytes = 0;      // buffers still to be allocated outside the pool
    uint64_t reserve_bytes = 0;    // the caller's scratch allowance (context, prefill chunk)
    // Adaptive sizing leaves max(min_headroom_bytes, reserve_bytes) outside the pool (the seed's
    // "larger of 6 GB or the scratch allowance").
    uint64_t min_headroom_bytes = 6'000'000'000;
    // Set for a device pool: the free device memory the caller measured (cudaMemGetInfo);
    // host memory facts are then not read.
    std::optional<uint64_t> measured_usable_bytes;
};

struct PoolBudget {
    PoolMode mode = PoolMode::Adaptive;
    uint64_t n_slots = 0;
    uint64_t bytes = 0;       // n_slots · slot_bytes
    std::string description;  // one line for logs: how the size was chosen
};

// Resolves the setting to a whole number of slots, never more than the table's records.
// Explicit: N GB floored to slots; 0 gives 0 slots (no cache); a pool that cannot hold
// step_records slots throws InvalidInput saying the smallest workable value. Max: every record.
// Adaptive: usable memory minus fixed buffers minus the headroom; raised to one step's union
// when memory allows it, else throws ResourceExhausted with the numbers. Mapped and Staging are
// the caller's to build (Internal here).
PoolBudget resolve_pool_budget(const PoolSetting& setting, const PoolRequirements& requirements,
                               const MemorySources& sources = {});

// The scratch of one prefill chunk beside the pool (seed "Memory and scheduling": prefill_quantum
// sets the largest chunk and its scratch reservation): rows · row_bytes + fixed_bytes.
struct ChunkScratch {
    int64_t quantum = 512;     // --prefill-quantum: the chunk asked for
    int64_t min_rows = 1;      // never fewer (unless the quantum is): a decode step's rows
    uint64_t row_bytes = 0;    // scratch per row
    uint64_t fixed_bytes = 0;  // scratch whatever the rows
    uint64_t bytes(int64_t rows) const {
        return static_cast<uint64_t>(rows) * row_bytes + fixed_bytes;
    }
};

struct ChunkFit {
    int64_t rows = 0;            // rows per prefill call: the quantum, or fewer to fit memory
    uint64_t scratch_bytes = 0;  // the reservation for those rows
    std::string description;     // one line for logs
};

// Fits a prefill chunk into what `budget` leaves of requirements.measured_usable_bytes (which
// must be set) after requirements.fixed_bytes. Explicit and max pools must leave a whole
// quantum's scratch, else InvalidInput naming --pool-gb, --prefill-quantum, every size and the
// largest value of each flag that fits. An adaptive pool was sized with the quantum's scratch
// reserved (requirements.reserve_bytes); only when it had to be raised to one layer-step's union
// does the chunk shrink to what is left (at least min(min_rows, quantum)): actual chunks may be
// smaller to fit available memory.
ChunkFit fit_prefill_chunk(const PoolSetting& setting, const PoolBudget& budget,
                           const PoolRequirements& requirements, const ChunkScratch& scratch);

// The quantum an automatic prefill quantum comes to on a device: scratch.quantum grown, as far
// as the memory the pool and the fixed buffers leave holds (less
// requirements.min_headroom_bytes), toward `streaming_rows` beside an explicit pool that holds
// less than the table (the experts stream from the host or the disk, and every chunk reads most
// of the table), or toward `resident_rows` beside a pool of any kind that holds the whole table
// (each chunk's expert GEMMs then reuse every weight they read across more tokens). An adaptive
// pool smaller than the table took that memory for experts: scratch.quantum.
int64_t grown_prefill_quantum(const PoolSetting& setting, const PoolBudget& budget,
                              const PoolRequirements& requirements, const ChunkScratch& scratch,
                              int64_t streaming_rows, int64_t resident_rows);

}  // namespace cherenkov::engine
