// Downloads one commit of an HF repository into a directory: metadata first (config, tokenizer,
// chat template, shard index), then the shards the index names (or model.safetensors). Files
// already complete are kept; partial ones resume with Range. The architecture is checked and the
// disk space counted before any weights are fetched.
#pragma once

#include <cstdint>
#include <string>

#include "store/index/index_options.h"

namespace cherenkov::store {

struct SnapshotDownload {
    std::string repo;
    std::string commit;  // a full commit (or a revision, for the deprecated `download` command)
    bool metadata_only = false;
    // Bytes to keep free beyond the download itself (the packed store that follows).
    uint64_t extra_bytes_needed = 0;
};

struct SnapshotResult {
    std::string commit;
    uint64_t bytes_downloaded = 0;  // by this call
    uint64_t n_files = 0;
};

// `options.hub` gives the endpoint and token. Throws Unsupported when the config is not a
// qwen4_exp checkpoint (before fetching weights), ResourceExhausted when the disk is too full.
SnapshotResult download_snapshot(const SnapshotDownload& request, const std::string& directory,
                                 const IndexOptions& options);

}  // namespace cherenkov::store
