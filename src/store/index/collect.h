// `model gc` and `model remove` (seed "Remove and collect"). remove only edits the catalog; gc
// deletes what the catalog records as managed and no model refers to, plus abandoned imports,
// skipping anything leased. Directories are deleted after being marked "deleting" in the catalog,
// so an interrupted collection is finished by the next one. Bytes are file lengths.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/index/gc_plan.h"
#include "store/index/index_options.h"

namespace cherenkov::store {

struct GcReportItem {
    std::string artifact_id;
    std::string kind;   // store | source | description
    std::string owner;  // managed | external
    std::string path;
    std::string action;  // delete | forget | skip
    std::string reason;
    uint64_t bytes = 0;
};

struct GcReport {
    bool dry_run = false;
    std::vector<GcReportItem> items;
    uint64_t bytes_freed = 0;  // would be freed, for a dry run
};

GcReport collect_garbage(const IndexOptions& options, bool dry_run);

struct RemoveReport {
    std::string model_id;
    std::string reference;
    bool source_only = false;
    std::vector<std::string> released_artifacts;  // now unreferenced; `model gc` reclaims them
};

// Plain: drops the model's entry. --source-only: releases the retained download after checking
// the prepared store (manifest, config, sampled records). Neither deletes files.
RemoveReport remove_model(const IndexOptions& options, const std::string& selector,
                          bool source_only);

}  // namespace cherenkov::store
