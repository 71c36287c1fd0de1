#include "engine/experts/block_address_table.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace cherenkov::engine {

BlockAddressTable build_block_address_table(int64_t layer, std::span<const RoutedExpert> routes,
                                            int64_t k,
                                            std::span<const ExpertResidency> residency_by_expert) {
    if (k <= 0 || routes.size() % static_cast<size_t>(k) != 0) {
        throw_invalid("block table: " + std::to_string(routes.size()) +
                      " routes are not whole rows of top-" + std::to_string(k));
    }
    const auto n_experts = static_cast<int64_t>(residency_by_expert.size());
    BlockAddressTable table;
    table.layer = layer;
    table.n_rows = static_cast<int64_t>(routes.size()) / k;

    // Union of the rows' experts, with each expert's entry index while building.
    std::vector<int32_t> entry_of(residency_by_expert.size(), -1);
    for (size_t route = 0; route < routes.size(); ++route) {
        const RoutedExpert& chosen = routes[route];
        if (chosen.expert < 0 || chosen.expert >= n_experts) {
            throw_invalid("block table: layer " + std::to_string(layer) + " row " +
                          std::to_string(route / static_cast<size_t>(k)) + " routes to expert " +
                          std::to_string(chosen.expert) + " outside [0, " +
                          std::to_string(n_experts) + ")");
        }
        int32_t& entry = entry_of[static_cast<size_t>(chosen.expert)];
        if (entry < 0) {
            entry = static_cast<int32_t>(table.entries.size());
            const ExpertResidency& where = residency_by_expert[static_cast<size_t>(chosen.expert)];
            table.entries.push_back(BlockEntry{.expert = chosen.expert,
                                               .slot = where.slot,
                                               .bits = where.bits,
                                               .resident = where.resident,
                                               .max_weight = chosen.weight});
            continue;
        }
        BlockEntry& existing = table.entries[static_cast<size_t>(entry)];
        existing.max_weight = std::max(existing.max_weight, chosen.weight);
    }

    std::sort(table.entries.begin(), table.entries.end(),
              [](const BlockEntry& a, const BlockEntry& b) {
                  if (a.resident != b.resident) return a.resident;
                  if (a.max_weight != b.max_weight) return a.max_weight > b.max_weight;
                  return a.expert < b.expert;
              });
    for (size_t entry = 0; entry < table.entries.size(); ++entry) {
        entry_of[static_cast<size_t>(table.entries[entry].expert)] = static_cast<int32_t>(entry);
        if (table.entries[entry].resident) table.n_resident = entry + 1;
    }

    table.row_weights.assign(table.entries.size() * static_cast<size_t>(table.n_rows), 0.0F);
    std::vector<int64_t> last_row(table.entries.size(), -1);  // per entry: last row that chose it
    for (size_t route = 0; route < routes.size(); ++route) {
        const auto row = route / static_cast<size_t>(k);
        const auto entry = static_cast<size_t>(entry_of[static_cast<size_t>(routes[route].expert)]);
        if (last_row[entry] == static_cast<int64_t>(row)) {
            throw_invalid("block table: layer " + std::to_string(layer) + " row " +
                          std::to_string(row) + " chooses expert " +
                          std::to_string(routes[route].expert) + " twice");
        }
        last_row[entry] = static_cast<int64_t>(row);
        table.row_weights[entry * static_cast<size_t>(table.n_rows) + row] = routes[route].weight;
    }
    return table;
}

uint64_t tag_slot_address(uint64_t address, int bits) {
    switch (bits) {
        case 4: return address;
        case 3: return address | (uint64_t{1} << 63);
        case 2: return address | (uint64_t{1} << 62);
        default: throw_invalid("expert precision " + std::to_string(bits) + ": expected 4, 3 or 2");
    }
}

}  // namespace cherenkov::engine
