// `prepare`: build what is missing of a store for the selected expert widths. The Q4 base is
// packed when the destination has no store, reused when it validates; Q3 / Q2 tables are derived
// from it when selected and missing or invalid; unselected tables are left as they are.
#pragma once

#include <string>
#include <vector>

#include "store/packer/packer.h"

namespace cherenkov::store {

struct PrepareOptions {
    std::string source_dir;
    std::string output_dir;
    std::vector<int> expert_bits = {4};  // any of 4, 3, 2
    unsigned n_threads = 0;
    ProgressCallback progress;
};

struct PrepareResult {
    bool base_packed = false;  // false: an existing valid store was reused
    std::vector<int> derived;  // low-bit widths built now
    std::vector<int> reused;   // low-bit widths already valid
    StoreManifest manifest;
};

// Parses "4,3,2", "4 3" or a single width; throws InvalidInput naming the bad item.
std::vector<int> parse_expert_bits(const std::vector<std::string>& items);

PrepareResult prepare_store(const PrepareOptions& options);

}  // namespace cherenkov::store
