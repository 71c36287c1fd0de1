// `prepare`: build what is missing of a store for the selected expert widths. The Q4 base is
// packed when the destination has no store, reused when it validates; Q3 / Q2 tables are derived
// from it when selected and missing or invalid; metadata files the store lacks are filled from
// the source; unselected tables are left as they are. Changes to an existing directory are made
// in place, file by file (store_update.h); the model index publishes changes to its managed
// stores as new stores instead (index/model_store_update.h).
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
    bool base_packed = false;           // false: an existing valid store was reused
    std::vector<int> derived;           // low-bit widths built now
    std::vector<int> reused;            // low-bit widths already valid
    std::vector<std::string> repaired;  // metadata files filled from the source
    bool published = false;             // the changes were published as a new store (the index's)
    StoreManifest manifest;
};

// Parses "4,3,2", "4 3" or a single width; throws InvalidInput naming the bad item.
std::vector<int> parse_expert_bits(const std::vector<std::string>& items);

PrepareResult prepare_store(const PrepareOptions& options);

// Throws InvalidInput unless the checkpoint `source_dir` is the one the store `store_dir` records
// in `recorded` (same kind and content hashes; a moved or touched copy is the same source). The
// message ends with `advice` (what to do instead).
void require_same_source(const std::string& store_dir, const SourceIdentity& recorded,
                         const std::string& source_dir,
                         const std::string& advice = "remove it or choose another --output");

}  // namespace cherenkov::store
