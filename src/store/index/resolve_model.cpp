#include "store/index/resolve_model.h"

#include <filesystem>

#include "base/error.h"
#include "model_data/inspect/store_report.h"
#include "store/index/model_index.h"
#include "store/index/model_lookup.h"
#include "store/index/prepare_command.h"
#include "store/index/selector.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

bool is_packed_directory(const std::string& path) {
    std::error_code ec;
    return fs::is_directory(path, ec) && model_data::inspect::is_store_directory(path);
}

[[noreturn]] void fail_unregistered(const Selector& selector, const IndexOptions& options) {
    switch (selector.kind) {
        case SelectorKind::Name: {
            throw_not_found("no indexed model has the alias or ID '" + selector.name +
                            "' (see cherenkov model list)");
        }
        case SelectorKind::Path: {
            std::error_code ec;
            if (!fs::exists(selector.path, ec)) {
                throw_not_found(selector.path + ": no such file or directory");
            }
            throw_not_found(selector.path + " is not a prepared store; run `" +
                            prepare_command(selector.text, "", options) + "`");
        }
        default:
            throw_not_found(selector.text + " is not in the model index; run `" +
                            prepare_command(selector.text, "", options) + "`");
    }
}

}  // namespace

ResolvedModel resolve_model(const std::string& text, const IndexOptions& options) {
    const Selector selector = parse_selector(text.empty() ? default_model_reference() : text);
    if (selector.kind == SelectorKind::Url) {
        throw_unsupported(text + ": models run from a prepared store; prepare it first");
    }
    const ModelIndex index(options.paths);
    ModelIndex::Snapshot snapshot = index.read();  // holds the shared index lock
    const ModelEntry* model = match_one(snapshot.catalog, selector, options.paths);
    ResolvedModel resolved;
    if (model == nullptr) {
        // Unregistered packed directories still run, without a lease (nothing owns them).
        std::string path = selector.kind == SelectorKind::Path ? selector.path : std::string();
        std::error_code ec;
        if (selector.kind == SelectorKind::Name && fs::exists(selector.name, ec)) {
            path = selector.name;
        }
        if (path.empty() || !is_packed_directory(path)) fail_unregistered(selector, options);
        resolved.store_dir = canonical_path(path);
        resolved.selector = text;
        resolved.reference = resolved.store_dir;
        resolved.source = resolved.store_dir;
        return resolved;
    }
    resolved.model_id = model->id;
    resolved.selector = text;
    resolved.alias = model->alias;
    resolved.reference = model_reference(*model);
    resolved.source = source_uri(model->source);
    if (model->store_artifact.empty()) {
        throw_not_found(resolved.reference + " (" + resolved.source +
                        ") is registered but not prepared; run `" +
                        prepare_command(text, "", options) + "`");
    }
    const Artifact* artifact = snapshot.catalog.find_artifact(model->store_artifact);
    resolved.store_dir = artifact_location(*artifact, options.paths);
    std::optional<FileLock> lease = index.try_lease(artifact->id, LockMode::Shared);
    if (!lease) {
        throw Error(ErrorKind::Busy, resolved.reference + ": its store " + resolved.store_dir +
                                         " is being collected or rewritten; try again");
    }
    resolved.lease = std::move(*lease);
    if (!is_packed_directory(resolved.store_dir)) {
        throw_corrupt(resolved.reference + ": its prepared store " + resolved.store_dir +
                      " is missing or has no manifest.json; run `" +
                      prepare_command(text, "", options) + "` again");
    }
    return resolved;
}

}  // namespace cherenkov::store
