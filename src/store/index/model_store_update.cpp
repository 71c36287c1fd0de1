#include "store/index/model_store_update.h"

#include <filesystem>
#include <optional>

#include "base/error.h"
#include "base/log.h"
#include "store/index/model_lookup.h"
#include "store/index/prepare_command.h"
#include "store/store_update.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

// The model's current store, with a shared lease that keeps it whole while it is read and
// linked from (gc takes the lease exclusively before deleting).
struct CurrentStore {
    std::string artifact_id;
    std::string dir;
    Ownership owner = Ownership::Managed;
    std::string reference;  // the model's alias or ID, for messages
    FileLock lease;
};

CurrentStore lease_current_store(const ModelIndex& index, const std::string& model_id) {
    const ModelIndex::Snapshot snapshot = index.read();
    const ModelEntry* model = snapshot.catalog.find_model(model_id);
    if (model == nullptr) throw_not_found("model " + model_id + " is not in the index");
    CurrentStore store;
    store.reference = model_reference(*model);
    if (model->store_artifact.empty()) throw_not_found(store.reference + " has no prepared store");
    const Artifact* artifact = snapshot.catalog.find_artifact(model->store_artifact);
    store.artifact_id = artifact->id;
    store.owner = artifact->owner;
    store.dir = artifact_location(*artifact, index.paths());
    std::optional<FileLock> lease = index.try_lease(artifact->id, LockMode::Shared);
    if (!lease) {
        throw Error(ErrorKind::Busy, store.reference + ": its store " + store.dir +
                                         " is being collected or rewritten; try again");
    }
    store.lease = std::move(*lease);
    return store;
}

// Drops the planned metadata repairs (with a warning) or throws, when the checkpoint that would
// fill them is not the one the store was packed from.
void check_metadata_source(const CurrentStore& store, const ModelStoreRequest& request,
                           const IndexOptions& options, StoreChanges& changes) {
    if (request.metadata_source.empty()) return;
    const std::string advice =
        "the checkpoint changed since " + store.reference + " was prepared; `" +
        index_command("model remove " + shell_quote(store.reference), options) +
        "` and prepare it again";
    if (request.mismatch == SourceMismatch::Fail) {
        require_same_source(store.dir, changes.manifest.source, request.metadata_source, advice);
        return;
    }
    if (changes.missing_metadata.empty()) return;
    try {
        require_same_source(store.dir, changes.manifest.source, request.metadata_source, advice);
    } catch (const Error& error) {
        log_warn("store", "not filling missing metadata of " + store.dir + " from " +
                              request.metadata_source + ": " + error.what());
        changes.missing_metadata.clear();
    }
}

PrepareResult result_of(const StoreChanges& changes) {
    PrepareResult result;
    result.manifest = changes.manifest;
    result.derived = changes.missing_bits;
    result.reused = changes.valid_bits;
    result.repaired = changes.missing_metadata;
    return result;
}

}  // namespace

std::string metadata_source_of(const ModelEntry& model, const StoragePaths& paths) {
    std::error_code ec;
    if ((model.source.kind == SourceKind::Local || model.source.kind == SourceKind::Disk) &&
        fs::is_directory(model.source.path, ec)) {
        return model.source.path;
    }
    if (!model.source_artifact.empty() &&
        fs::is_directory(paths.artifact_dir(model.source_artifact), ec)) {
        return paths.artifact_dir(model.source_artifact);
    }
    return "";
}

ModelStoreUpdate update_model_store(const ModelIndex& index, const std::string& model_id,
                                    const ModelStoreRequest& request, const IndexOptions& options) {
    while (true) {
        const CurrentStore store = lease_current_store(index, model_id);
        StoreChanges changes;
        try {
            changes = plan_store_changes(store.dir, request.expert_bits, request.metadata_source,
                                         request.rebuild_bits);
        } catch (const Error& error) {
            throw error.with_context("the prepared store " + store.dir + " of " + store.reference +
                                     " is invalid");
        }
        check_metadata_source(store, request, options, changes);
        ModelStoreUpdate update{store.dir, store.artifact_id, result_of(changes)};
        if (changes.empty()) return update;
        const StoreChangeOptions change_options{request.metadata_source, options.n_threads,
                                                pack_events(options)};
        if (store.owner == Ownership::External) {
            // The user's directory: changed in place, each file published atomically.
            emit_status(options, "updating " + store.dir);
            apply_store_changes(store.dir, changes, change_options);
            return update;
        }
        std::optional<Import> import;
        std::string busy;
        {
            ModelIndex::Transaction transaction = index.begin();
            const ModelEntry* model = transaction.catalog().find_model(model_id);
            // Another process published a store meanwhile: look at that one.
            if (model == nullptr || model->store_artifact != store.artifact_id) continue;
            ImportStart start = start_import(transaction, index, ArtifactKind::Store, model_id);
            if (start.import) {
                transaction.commit();
                import = std::move(start.import);
            } else {
                busy = start.busy_artifact;
            }
        }
        if (!import) {
            emit_status(options, "waiting for another process updating " + store.reference);
            index.wait_lease(busy, LockMode::Shared).release();
            continue;
        }
        // An adopted import holds a dead process's half-made files: start it over.
        if (import->adopted) remove_artifact_files(index.paths(), import->artifact_id);
        emit_status(options, "publishing a new store of " + store.reference + " at " + import->dir);
        try {
            publish_changed_store(store.dir, import->dir, changes, change_options);
        } catch (const Error&) {
            abandon_import(index, *import);
            throw;
        }
        {
            ModelIndex::Transaction transaction = index.begin();
            Catalog& catalog = transaction.catalog();
            catalog.find_artifact(import->artifact_id)->state = ArtifactState::Ready;
            // A model removed meanwhile leaves the new store unreferenced, for gc.
            if (ModelEntry* model = catalog.find_model(model_id))
                model->store_artifact = import->artifact_id;
            transaction.commit();
        }
        update.store_dir = import->dir;
        update.artifact_id = import->artifact_id;
        update.result.published = true;
        return update;
    }
}

PrepareResult complete_resolved_store(ResolvedModel& model, const std::vector<int>& expert_bits,
                                      const IndexOptions& options,
                                      const std::vector<int>& rebuild_bits) {
    if (model.model_id.empty()) {
        const StoreChanges changes =
            plan_store_changes(model.store_dir, expert_bits, "", rebuild_bits);
        if (!changes.empty()) {
            emit_status(options, "updating " + model.store_dir);
            apply_store_changes(model.store_dir, changes,
                                {"", options.n_threads, pack_events(options)});
        }
        return result_of(changes);
    }
    const ModelIndex index(options.paths);
    ModelStoreRequest request;
    request.expert_bits = expert_bits;
    request.rebuild_bits = rebuild_bits;
    request.mismatch = SourceMismatch::Ignore;
    {
        const ModelIndex::Snapshot snapshot = index.read();
        if (const ModelEntry* entry = snapshot.catalog.find_model(model.model_id))
            request.metadata_source = metadata_source_of(*entry, index.paths());
    }
    ModelStoreUpdate update = update_model_store(index, model.model_id, request, options);
    if (update.store_dir != model.store_dir) {
        // Lease the new store before the old lease goes.
        std::optional<FileLock> lease = index.try_lease(update.artifact_id, LockMode::Shared);
        if (!lease) {
            throw Error(ErrorKind::Busy, model.reference + ": its new store " + update.store_dir +
                                             " is being collected; try again");
        }
        model.store_dir = update.store_dir;
        model.lease = std::move(*lease);
    }
    return update.result;
}

}  // namespace cherenkov::store
