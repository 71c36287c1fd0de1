// What the expert cache is built from: the expert tables by precision, the resident and miss
// precisions, the pool size in slots, the replacement policy, IO settings and cut_weak.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "engine/experts/record_reader.h"
#include "engine/experts/replacement_policy.h"
#include "store/manifest/record_layout.h"

namespace cherenkov::engine {

// One expert table file: experts.bin (Q4), experts3.bin or experts2.bin with its layout.
struct ExpertTable {
    std::string path;
    store::ExpertLayout layout;
};

using ExpertTables = std::map<int, ExpertTable>;  // bits → table

struct ExpertCacheOptions {
    ExpertTables tables;  // must hold resident_bits, and miss_bits when it differs
    int resident_bits = 4;
    // Precision of demand misses that no prediction covered. 0: resident_bits. With residents at
    // 4, 3 or 2 gives mixed mode: lookahead reads and predicted misses stay at resident_bits.
    int miss_bits = 0;
    uint64_t n_slots = 0;  // from resolve_pool_budget; each slot holds one record of any table
    ReplacementKind policy = ReplacementKind::Lru;
    // Frequency policy: selections that halve an older selection's weight. 0: n_slots (about the
    // time the pool takes to turn over; best of the values tried on synthetic traces).
    double frequency_half_life_selections = 0.0;
    int n_io_threads = 4;  // reads in flight
    // Records are read in pieces of at least this many bytes by several IO threads at once
    // (expert_io.h); 0 reads each record on one thread.
    uint64_t io_piece_bytes = uint64_t{512} << 10;
    DirectIo direct_io = DirectIo::Auto;
    bool lookahead = true;  // issue background reads for predict(); accuracy is recorded anyway
    // Start lookahead reads only while no demand read is queued or in flight (expert_io.h).
    bool lookahead_after_demand = true;
    // Experts with max_weight below this whose reads have not landed when every other expert of
    // the batch has been delivered are skipped (their reads finish in the background). 0: off.
    // Makes output depend on IO timing.
    float cut_weak = 0.0F;
    // Touch every pool page at load (slot_pool.h). Off only for pools that will never be filled
    // (benchmarks with a reader that does not write).
    bool prefault_pool = true;
    RecordReaderFactory open_reader;  // empty: open_file_record_reader
};

}  // namespace cherenkov::engine
