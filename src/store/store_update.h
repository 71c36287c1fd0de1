// Changes to an existing store: low-bit expert tables to derive (absent or invalid) and metadata
// files to fill from the checkpoint (seed "Prepare and run", "Chat template"). A change is made
// in place (an external directory, which is the user's) or published as a new store directory
// whose unchanged files are hard links to the old one's, so readers of the old store keep
// every file they opened and the old directory stays whole until it is collected.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "store/manifest/store_manifest.h"
#include "store/packer/packer.h"

namespace cherenkov::store {

// Files a store keeps from its checkpoint besides the weights. config.json is rewritten when
// packed (MTP disabled for a checkpoint without MTP weights, packed_config_text); the others
// are copied as they are.
inline constexpr const char* kStoreMetadataFiles[] = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"};

struct StoreChanges {
    StoreManifest manifest;                     // of the existing store
    std::vector<int> missing_bits;              // requested low-bit tables absent or invalid
    std::vector<int> valid_bits;                // requested low-bit tables already valid
    std::vector<std::string> missing_metadata;  // metadata files to copy from the source

    bool empty() const { return missing_bits.empty() && missing_metadata.empty(); }
};

// Validates the store at `store_dir` (as validate_store; a missing config.json is accepted when
// `metadata_source` has one to fill it from) and lists what `expert_bits` (4 is always there)
// and the checkpoint `metadata_source` ("" for none) add to it. Low-bit widths in `rebuild_bits`
// (--repack) count as missing even when their tables are valid. Changes nothing.
StoreChanges plan_store_changes(const std::string& store_dir, std::span<const int> expert_bits,
                                const std::string& metadata_source,
                                std::span<const int> rebuild_bits = {});

struct StoreChangeOptions {
    std::string metadata_source;  // where missing metadata files come from
    unsigned n_threads = 0;       // derivation threads, 0 = all cores
    ProgressCallback progress;
};

// Makes `changes` in `store_dir` itself. Every file is published atomically (written beside,
// synced, renamed), so a reader's open files keep their contents.
void apply_store_changes(const std::string& store_dir, const StoreChanges& changes,
                         const StoreChangeOptions& options);

// Publishes the store `from` plus `changes` as the new directory `to` (which must not exist):
// every file of `from` the change keeps is hard-linked (copied where the file system cannot
// link) into "<parent>/.<name>.partial-<pid>", the changes are made there, the whole is checked
// (validate_store), synced and renamed to `to`. `from` is not modified. A crash leaves no store
// at `to`; leftovers of dead processes are removed by the next publish to the same destination.
void publish_changed_store(const std::string& from, const std::string& to,
                           const StoreChanges& changes, const StoreChangeOptions& options);

}  // namespace cherenkov::store
