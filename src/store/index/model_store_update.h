// Changes to a model's prepared store (new low-bit tables, repaired metadata), made the way the
// seed's "Prepare and run" asks: each update of a managed store publishes a new store, so
// running readers keep their files. The change goes into a new managed artifact whose unchanged
// files are hard links to the old store's (store_update.h); the model then refers to it, and the
// old store, now unreferenced, is collected by `model gc` once no reader holds its lease. An
// external store (an export, a registered packed directory: the user's) is changed in place,
// file by file. `prepare` and loading (build_missing_store) both come through here.
#pragma once

#include <string>
#include <vector>

#include "store/index/index_options.h"
#include "store/index/model_index.h"
#include "store/index/resolve_model.h"
#include "store/prepare.h"

namespace cherenkov::store {

// What to do when the checkpoint that would fill missing metadata is not the store's source.
enum class SourceMismatch {
    Fail,    // throw InvalidInput (prepare: a changed checkpoint never updates an old store)
    Ignore,  // leave the metadata as it is, with a warning (loading)
};

struct ModelStoreRequest {
    std::vector<int> expert_bits = {4};
    std::vector<int> rebuild_bits;  // low-bit widths rebuilt although valid (--repack)
    std::string metadata_source;    // checkpoint to fill missing metadata from ("" : none)
    SourceMismatch mismatch = SourceMismatch::Fail;
};

struct ModelStoreUpdate {
    std::string store_dir;    // the model's store after the update
    std::string artifact_id;  // its artifact
    PrepareResult result;     // derived, reused and repaired parts; published for a new store
};

// Brings the store of indexed model `model_id` up to `request`. Throws NotFound when the model
// is gone or has no store, Busy when its store is being collected, and what validation throws
// for a damaged store. Waits for another process's live update of the same model, then
// rechecks.
ModelStoreUpdate update_model_store(const ModelIndex& index, const std::string& model_id,
                                    const ModelStoreRequest& request, const IndexOptions& options);

// For loaders: brings the store `model` resolved to up to `expert_bits`, filling missing
// metadata from the model's local or retained source when that is still the store's source.
// An indexed model's change is published by update_model_store, and `model` then names the new
// store and holds its lease (the old lease is released). A directory given by path (no model ID)
// is changed in place. Low-bit widths in `rebuild_bits` (--repack) are rebuilt although valid.
// Returns what was done (nothing when nothing was missing).
PrepareResult complete_resolved_store(ResolvedModel& model, const std::vector<int>& expert_bits,
                                      const IndexOptions& options,
                                      const std::vector<int>& rebuild_bits = {});

// The checkpoint directory a model's metadata can be filled from: its local or disk source when
// the directory exists, else its retained download; "" when there is none.
std::string metadata_source_of(const ModelEntry& model, const StoragePaths& paths);

}  // namespace cherenkov::store
