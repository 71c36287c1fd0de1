#include "store/index/prepare_model.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "store/index/hf_download.h"
#include "store/index/model_index.h"
#include "store/index/model_lookup.h"
#include "store/index/model_store_update.h"
#include "store/index/prepare_command.h"
#include "store/index/register_model.h"
#include "store/store_check.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

ModelEntry& model_in(ModelIndex::Transaction& transaction, const std::string& model_id) {
    ModelEntry* model = transaction.catalog().find_model(model_id);
    if (model == nullptr) {
        throw_not_found("model " + model_id + " was removed from the index while preparing it");
    }
    return *model;
}

// Waits until the live process importing `artifact_id` finishes (or dies).
void wait_for_import(const ModelIndex& index, const std::string& artifact_id,
                     const std::string& what, const IndexOptions& options) {
    emit_status(options, "waiting for another process " + what);
    index.wait_lease(artifact_id, LockMode::Shared).release();
}

struct SourceCopy {
    std::string dir;
    std::optional<Import> import;  // set when this run downloads
};

// The retained copy, else a download into an owned import (resuming an abandoned one).
SourceCopy obtain_hf_source(const ModelIndex& index, const std::string& model_id,
                            uint64_t store_bytes, const IndexOptions& options,
                            PrepareModelResult& result) {
    SourceCopy copy;
    ModelSource source;
    while (!copy.import) {
        std::string busy;
        {
            ModelIndex::Transaction transaction = index.begin();
            const ModelEntry& model = model_in(transaction, model_id);
            source = model.source;
            if (!model.source_artifact.empty()) {
                emit_status(options, "using the retained copy of " + source_uri(source));
                copy.dir = index.paths().artifact_dir(model.source_artifact);
                return copy;
            }
            ImportStart start = start_import(transaction, index, ArtifactKind::Source, model_id);
            if (start.import) {
                transaction.commit();
                copy.import = std::move(start.import);
                continue;
            }
            busy = start.busy_artifact;
        }
        wait_for_import(index, busy, "downloading " + source_uri(source), options);
    }
    copy.dir = copy.import->dir;
    if (copy.import->adopted) emit_status(options, "resuming an interrupted download");
    IndexOptions hub_options = options;
    hub_options.hub.endpoint = source.endpoint;
    SnapshotDownload request{source.repo, source.commit, false, store_bytes};
    const SnapshotResult downloaded = download_snapshot(request, copy.dir, hub_options);
    result.downloaded = true;
    result.downloaded_bytes = downloaded.bytes_downloaded;
    return copy;
}

uint64_t estimated_store_bytes(const ModelIndex& index, const ModelEntry& model) {
    if (model.description_artifact.empty()) return 0;
    const auto description =
        read_description(index.paths().artifact_dir(model.description_artifact));
    const auto& report = description.report;
    const nlohmann::json pointer_value = report.value(
        nlohmann::json::json_pointer("/preparation/bytes/estimated_store"), nlohmann::json(0));
    return pointer_value.is_number_unsigned() ? pointer_value.get<uint64_t>() : 0;
}

// prepare packs checkpoint directories (or takes packed ones): a file given as the source
// (config.json, a shard) is refused before anything is registered.
void refuse_files(const Selector& selector, const IndexOptions& options) {
    std::string path;
    std::error_code ec;
    if (selector.kind == SelectorKind::Path) path = selector.path;
    if (selector.kind == SelectorKind::Name && fs::exists(selector.name, ec)) path = selector.name;
    if (path.empty() || fs::is_directory(path, ec) || !fs::exists(path, ec)) return;
    std::string hint;
    const fs::path directory = fs::absolute(path, ec).parent_path();
    if (fs::is_regular_file(directory / "config.json", ec)) {
        std::string parent = fs::path(path).parent_path().string();
        // A bare word would be looked up as an alias first: keep it a path.
        if (parent.find('/') == std::string::npos) parent = "./" + parent;
        if (parent == "./") parent = ".";
        hint = "; to prepare the checkpoint it belongs to, name its directory: `" +
               prepare_command(parent, "", options) + "`";
    }
    throw_invalid(
        path + ": expected a checkpoint directory or a packed store directory, not a file" + hint);
}

}  // namespace

PrepareModelResult prepare_model(const PrepareModelOptions& prepare, const IndexOptions& options) {
    ModelIndex index(options.paths);
    const Selector selector =
        parse_selector(prepare.source.empty() ? default_model_reference() : prepare.source);
    refuse_files(selector, options);
    PrepareModelResult result;
    result.model_id = register_model(index, selector, prepare.alias, options).model_id;

    std::string output_dir;
    if (!prepare.output_dir.empty()) {
        output_dir = canonical_path(prepare.output_dir);
        const std::string artifacts = canonical_path(options.paths.artifacts_dir());
        if (output_dir == artifacts || output_dir.rfind(artifacts + "/", 0) == 0) {
            throw_invalid("--output " + prepare.output_dir +
                          ": must be outside the managed artifacts directory");
        }
    }

    // The destination: --output, the recorded store, or a new managed store import.
    std::optional<Import> store_import;
    ModelEntry model;
    bool destination_chosen = false;
    bool update_recorded_store = false;
    while (!destination_chosen) {
        std::string busy;
        {
            ModelIndex::Transaction transaction = index.begin();
            model = model_in(transaction, result.model_id);
            if (!output_dir.empty()) break;
            if (!model.store_artifact.empty()) {
                const Artifact* artifact =
                    transaction.catalog().find_artifact(model.store_artifact);
                output_dir = artifact_location(*artifact, index.paths());
                // A recorded store whose directory is gone is packed again where it was.
                update_recorded_store = looks_like_store(output_dir);
                break;
            }
            ImportStart start = start_import(transaction, index, ArtifactKind::Store, model.id);
            if (start.import) {
                transaction.commit();
                store_import = std::move(start.import);
                output_dir = store_import->dir;
                destination_chosen = true;
                continue;
            }
            busy = start.busy_artifact;
        }
        wait_for_import(index, busy, "preparing " + model_reference(model), options);
    }
    if (update_recorded_store) {
        // Variants and repairs: a managed store is published anew, an external one is changed
        // in place (model_store_update.h). The metadata source must still be the store's.
        ModelStoreRequest request;
        request.expert_bits = prepare.expert_bits;
        request.metadata_source = metadata_source_of(model, index.paths());
        request.mismatch = SourceMismatch::Fail;
        const ModelStoreUpdate update = update_model_store(index, model.id, request, options);
        result.store = update.result;
        result.store_dir = update.store_dir;
        result.reference = model_reference(model);
        result.source_retained = !model.source_artifact.empty();
        return result;
    }
    if (model.source.kind == SourceKind::Packed && !prepare.output_dir.empty()) {
        throw_invalid(source_uri(model.source) +
                      " is already a packed store; --output applies "
                      "to checkpoints");
    }

    std::error_code ec;
    const bool need_source = !(fs::is_directory(output_dir, ec) && looks_like_store(output_dir));
    SourceCopy source;
    // Local sources are always named, so an existing store is checked against them; an HF
    // source is only downloaded when there is no store yet.
    if (model.source.kind == SourceKind::Local || model.source.kind == SourceKind::Disk) {
        source.dir = model.source.path;
    }
    if (need_source) {
        switch (model.source.kind) {
            case SourceKind::Local:
            case SourceKind::Disk: break;
            case SourceKind::Hf:
                source = obtain_hf_source(index, model.id, estimated_store_bytes(index, model),
                                          options, result);
                break;
            case SourceKind::Packed:
                throw_not_found(model.source.path + ": the registered packed store is missing");
        }
    }

    PrepareOptions pack;
    pack.source_dir = source.dir;
    pack.output_dir = output_dir;
    pack.expert_bits = prepare.expert_bits;
    pack.n_threads = options.n_threads;
    pack.progress = [&options](const PackProgress& progress) {
        emit(options, IndexEvent{IndexEvent::Kind::Pack, progress.phase, progress.items_done,
                                 progress.items_total, progress.bytes_done, progress.bytes_total});
    };
    emit_status(options, "preparing " + output_dir);
    try {
        result.store = prepare_store(pack);
    } catch (const Error&) {
        // The packer left nothing at the destination; a download stays for the next attempt.
        if (store_import) abandon_import(index, *store_import);
        throw;
    }

    // Publish: the store (and a kept download) become the model's; a dropped download is
    // marked for deletion in the same catalog version.
    {
        ModelIndex::Transaction transaction = index.begin();
        Catalog& catalog = transaction.catalog();
        ModelEntry* entry = catalog.find_model(result.model_id);
        if (store_import) {
            catalog.find_artifact(store_import->artifact_id)->state = ArtifactState::Ready;
            if (entry != nullptr) entry->store_artifact = store_import->artifact_id;
        } else if (!prepare.output_dir.empty() && entry != nullptr) {
            std::string existing;
            for (const Artifact& artifact : catalog.artifacts) {
                if (artifact.owner == Ownership::External && artifact.path == output_dir &&
                    artifact.state == ArtifactState::Ready) {
                    existing = artifact.id;
                }
            }
            if (existing.empty()) {
                Artifact artifact;
                artifact.id = transaction.new_artifact_id();
                artifact.kind = ArtifactKind::Store;
                artifact.owner = Ownership::External;
                artifact.state = ArtifactState::Ready;
                artifact.path = output_dir;
                artifact.model_id = result.model_id;
                catalog.artifacts.push_back(artifact);
                existing = artifact.id;
            }
            // One record, one model: the directory now holds this model's export.
            for (ModelEntry& other : catalog.models) {
                if (other.id == result.model_id) continue;
                if (other.store_artifact == existing) other.store_artifact.clear();
                std::erase(other.export_artifacts, existing);
            }
            // An export never moves the model: with a store it is recorded beside it (kept by
            // gc, the store stays the one the model runs from); without one it becomes the
            // model's store, there being nothing else to run.
            if (entry->store_artifact.empty()) entry->store_artifact = existing;
            if (entry->store_artifact != existing &&
                std::find(entry->export_artifacts.begin(), entry->export_artifacts.end(),
                          existing) == entry->export_artifacts.end()) {
                entry->export_artifacts.push_back(existing);
            }
            result.exported = entry->store_artifact != existing;
        }
        if (source.import) {
            Artifact* artifact = catalog.find_artifact(source.import->artifact_id);
            if (prepare.keep_source && entry != nullptr) {
                artifact->state = ArtifactState::Ready;
                entry->source_artifact = artifact->id;
            } else {
                artifact->state = ArtifactState::Deleting;
            }
        }
        if (entry != nullptr) {
            result.reference = model_reference(*entry);
            result.source_retained = !entry->source_artifact.empty();
        }
        transaction.commit();
    }
    result.store_dir = output_dir;
    if (source.import && !prepare.keep_source) {
        emit_status(options, "removing the download (use --keep-source to retain it)");
        remove_artifact_files(index.paths(), source.import->artifact_id);
        ModelIndex::Transaction transaction = index.begin();
        transaction.catalog().remove_artifact(source.import->artifact_id);
        transaction.commit();
        result.source_removed = true;
    }
    return result;
}

}  // namespace cherenkov::store
