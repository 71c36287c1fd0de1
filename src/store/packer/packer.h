// Packs a local checkpoint (HF BF16 or MLX affine) into a new store directory: plans, checks disk
// space, writes dense.bin / ngram.bin / experts.bin into a temporary directory beside the
// destination, syncs, writes config and tokenizer files and the manifest last, then publishes by
// renaming the directory. A crash at any point leaves no store at the destination.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "store/manifest/store_manifest.h"

namespace cherenkov::store {

struct PackProgress {
    uint64_t bytes_done = 0;  // source bytes consumed
    uint64_t bytes_total = 0;
    uint64_t items_done = 0;  // tensors and expert records written
    uint64_t items_total = 0;
    std::string phase;  // "dense", "ngram", "experts", "experts3"...
};

using ProgressCallback = std::function<void(const PackProgress&)>;

struct PackOptions {
    std::string source_dir;
    std::string output_dir;
    unsigned n_threads = 0;  // 0 = all cores
    ProgressCallback progress;
};

// Throws InvalidInput when the destination exists, ResourceExhausted when the free space of
// the destination's file system is below the store's size.
StoreManifest pack_store(const PackOptions& options);

// Free bytes for an unprivileged writer on the file system holding `directory`.
uint64_t free_disk_bytes(const std::string& directory);
// Throws ResourceExhausted naming `directory` when fewer than `needed_bytes` are free.
void require_disk_space(const std::string& directory, uint64_t needed_bytes,
                        const std::string& what);

// The config.json of a store packed from a checkpoint whose config.json is `source_text`: the
// text unchanged, or with mtp_num_hidden_layers set to 0 (top level and text_config) when the
// config declares MTP layers and the checkpoint has no MTP weights. `file` names the source in
// errors (Corrupt for text that is not a JSON object).
std::string packed_config_text(const std::string& source_text, bool has_mtp_weights,
                               const std::string& file);

// Beside `destination`: "<parent>/.<name>.partial-<pid>". Leftovers of dead processes are
// removed by remove_stale_partials.
std::string partial_path(const std::string& destination);
void remove_stale_partials(const std::string& destination);

}  // namespace cherenkov::store
