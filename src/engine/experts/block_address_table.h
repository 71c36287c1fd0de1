// Block address table (seed "Block address tables", "Decode and expert IO"): for one step and
// layer, the union of the experts chosen by all rows (token and drafts), each mapped to its pool
// slot and tagged with its precision, ordered resident-first then by maximum routing weight,
// with each row's routing weight per entry (0 where the row did not choose the expert). Kernels
// follow the table, so experts can change slots without moving anything else. A pure structure:
// built from routing and a residency snapshot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cherenkov::engine {

// One (expert, weight) of a row's top-k routing.
struct RoutedExpert {
    int32_t expert = 0;
    float weight = 0.0F;
};

// Where an expert's record is when the table is built: its slot (-1: none yet), the precision of
// the record in it, and whether the record is complete (resident) or still being read.
struct ExpertResidency {
    int32_t slot = -1;
    int bits = 4;
    bool resident = false;
};

struct BlockEntry {
    int32_t expert = 0;
    int32_t slot = -1;
    int bits = 4;
    bool resident = false;
    float max_weight = 0.0F;  // largest weight any row gave the expert
};

struct BlockAddressTable {
    int64_t layer = 0;
    int64_t n_rows = 0;
    std::vector<BlockEntry> entries;  // residents first, then by max_weight descending, then id
    std::vector<float> row_weights;   // [entries.size(), n_rows]
    size_t n_resident = 0;            // entries [0, n_resident) are resident

    float weight(size_t entry, int64_t row) const {
        return row_weights[entry * static_cast<size_t>(n_rows) + static_cast<size_t>(row)];
    }
};

// routes: [n_rows, k] row-major (row r's choices at [r·k, r·k + k)); residency_by_expert:
// [n_experts]. Throws InvalidInput for an expert outside [0, n_experts), a row choosing one
// expert twice, or a routes size that is not a multiple of k.
BlockAddressTable build_block_address_table(int64_t layer, std::span<const RoutedExpert> routes,
                                            int64_t k,
                                            std::span<const ExpertResidency> residency_by_expert);

// A slot address with the precision tag kernels read (seed: bit 63 marks Q3, bit 62 marks Q2;
// Q4 untagged). Kernels mask both bits before loading.
uint64_t tag_slot_address(uint64_t address, int bits);
inline constexpr uint64_t kSlotAddressTagMask = (uint64_t{1} << 63) | (uint64_t{1} << 62);

}  // namespace cherenkov::engine
