// `prepare SOURCE`: resolves the source through the index (registering it when new), downloads
// an HF source into a temporary owned directory when no retained copy exists, packs into a
// managed store artifacts/<id>/ (or exports to --output DIR, recorded as external), and removes
// the download after success unless --keep-source. Imports hold their artifact's lease, so a
// crash at any point leaves an import that `model gc` collects or the next `prepare` resumes.
// A model that has a store gets its variants and missing metadata through update_model_store
// (a managed store is published anew, never changed in place). An --output export of a model
// that has a store is recorded as the model's export and does not replace its store
// (docs/model-index.md).
#pragma once

#include <string>
#include <vector>

#include "store/index/index_options.h"
#include "store/prepare.h"

namespace cherenkov::store {

struct PrepareModelOptions {
    std::string source;  // a selector; empty selects the default checkpoint
    std::string alias;
    std::vector<int> expert_bits = {4};
    bool keep_source = false;
    std::string output_dir;  // export here instead of a managed store
};

struct PrepareModelResult {
    std::string model_id;
    std::string reference;  // alias, else ID
    std::string store_dir;
    PrepareResult store;
    bool downloaded = false;  // this run downloaded weights
    uint64_t downloaded_bytes = 0;
    bool source_retained = false;  // a retained copy exists after this run
    bool source_removed = false;   // this run's download was removed after packing
    bool exported = false;         // --output: recorded as an export; the model kept its own store
};

PrepareModelResult prepare_model(const PrepareModelOptions& prepare, const IndexOptions& options);

}  // namespace cherenkov::store
