#include "store/index/model_listing.h"

#include <filesystem>

#include "base/error.h"
#include "model_data/hub/hub_client.h"
#include "model_data/inspect/checkpoint_report.h"
#include "model_data/inspect/report_text.h"
#include "model_data/inspect/store_report.h"
#include "store/index/file_stores.h"
#include "store/index/model_index.h"
#include "store/index/model_lookup.h"
#include "store/index/register_model.h"
#include "store/manifest/store_manifest.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;
namespace inspect = model_data::inspect;
using nlohmann::json;

json source_json(const ModelSource& source) {
    json out{{"kind", source_kind_name(source.kind)}, {"uri", source_uri(source)}};
    if (!source.repo.empty()) out["repo"] = source.repo;
    if (!source.commit.empty()) out["commit"] = source.commit;
    if (!source.revision.empty()) out["revision"] = source.revision;
    if (!source.endpoint.empty()) out["endpoint"] = source.endpoint;
    if (!source.store_name.empty()) out["store"] = source.store_name;
    if (!source.path.empty()) out["path"] = source.path;
    return out;
}

// Expert widths whose tables are present: 4 when experts.bin is, 3 / 2 with their manifests.
json variants(const std::string& store_dir) {
    json out = json::array();
    std::error_code ec;
    if (fs::exists(store_dir + "/" + std::string(kExpertsName), ec)) out.push_back(4);
    for (int bits : {3, 2}) {
        if (fs::exists(store_dir + "/" + lowbit_manifest_name(bits), ec) &&
            fs::exists(store_dir + "/" + lowbit_experts_name(bits), ec)) {
            out.push_back(bits);
        }
    }
    return out;
}

}  // namespace

json list_models(const IndexOptions& options) {
    const Catalog catalog = ModelIndex(options.paths).load();
    json models = json::array();
    uint64_t owned_bytes = 0;
    uint64_t external_bytes = 0;
    for (const ModelEntry& model : catalog.models) {
        json entry{{"id", model.id},
                   {"alias", model.alias.empty() ? json(nullptr) : json(model.alias)},
                   {"reference", model_reference(model)},
                   {"source", source_json(model.source)},
                   {"prepared", !model.store_artifact.empty()},
                   {"store", nullptr},
                   {"retained_source", nullptr},
                   {"registered", model.registered_unix}};
        if (const Artifact* store = catalog.find_artifact(model.store_artifact)) {
            const std::string path = artifact_location(*store, options.paths);
            const uint64_t bytes = directory_bytes(path);
            (store->owner == Ownership::Managed ? owned_bytes : external_bytes) += bytes;
            std::error_code ec;
            entry["store"] = {{"id", store->id},
                              {"path", path},
                              {"owner", ownership_name(store->owner)},
                              {"present", fs::is_directory(path, ec)},
                              {"bytes", bytes},
                              {"variants", variants(path)}};
        }
        if (const Artifact* kept = catalog.find_artifact(model.source_artifact)) {
            const std::string path = artifact_location(*kept, options.paths);
            const uint64_t bytes = directory_bytes(path);
            owned_bytes += bytes;
            entry["retained_source"] = {{"id", kept->id}, {"path", path}, {"bytes", bytes}};
        }
        json exports = json::array();
        for (const std::string& id : model.export_artifacts) {
            const Artifact* exported = catalog.find_artifact(id);
            const std::string path = artifact_location(*exported, options.paths);
            const uint64_t bytes = directory_bytes(path);
            external_bytes += bytes;
            std::error_code ec;
            exports.push_back({{"id", id},
                               {"path", path},
                               {"present", fs::is_directory(path, ec)},
                               {"bytes", bytes},
                               {"variants", variants(path)}});
        }
        entry["exports"] = std::move(exports);
        models.push_back(std::move(entry));
    }
    return json{{"models", std::move(models)},
                {"totals", {{"owned_bytes", owned_bytes}, {"external_bytes", external_bytes}}}};
}

json list_stores(const IndexOptions& options) {
    const Catalog catalog = ModelIndex(options.paths).load();
    json stores = json::array();
    for (const FsStore& store : catalog.stores) {
        stores.push_back({{"id", store.id},
                          {"name", store.name},
                          {"root", store.root},
                          {"layout", store_layout_name(store.layout)},
                          {"enabled", store.enabled}});
    }
    return json{{"stores", std::move(stores)}};
}

inspect::InspectOutput inspect_model(const std::string& text, const IndexOptions& options) {
    const Selector selector = parse_selector(text);
    if (selector.kind == SelectorKind::Url) {
        return inspect::inspect_target(selector.path, options.hub.http);
    }
    const ModelIndex index(options.paths);
    const Catalog catalog = index.load();
    if (const ModelEntry* model = match_one(catalog, selector, options.paths)) {
        if (const Artifact* store = catalog.find_artifact(model->store_artifact)) {
            const std::string path = artifact_location(*store, options.paths);
            std::error_code ec;
            if (fs::is_directory(path, ec)) return inspect::inspect_store(path);
        }
        if (!model->description_artifact.empty()) {
            return read_description(index.paths().artifact_dir(model->description_artifact));
        }
        throw_not_found(model_reference(*model) +
                        " has neither a prepared store nor a saved "
                        "description");
    }
    switch (selector.kind) {
        case SelectorKind::Name: {
            std::error_code ec;
            if (fs::exists(selector.name, ec)) {
                return inspect::inspect_target(selector.name, options.hub.http);
            }
            throw_not_found("no indexed model has the alias or ID '" + selector.name +
                            "', and no file of that name exists");
        }
        case SelectorKind::Path: return inspect::inspect_target(selector.path, options.hub.http);
        case SelectorKind::Disk: {
            const FsStore* store = catalog.find_store_by_name(selector.disk.store);
            return inspect::inspect_target(locate_in_store(*store, selector.disk).path,
                                           options.hub.http);
        }
        case SelectorKind::Hf: {
            model_data::hub::HubClient client(options.hub);
            const std::string revision = selector.hf.revision.value_or("main");
            emit_status(options, "resolving hf://" + selector.hf.repo + "@" + revision);
            const auto info = client.resolve_revision(selector.hf.repo, revision);
            emit_status(options, "reading headers of hf://" + selector.hf.repo + "@" + info.commit);
            const auto snapshot = client.open_snapshot(selector.hf.repo, info.commit);
            json report = inspect::inspect_checkpoint(*snapshot);
            std::string rendered = inspect::render_report_text(report);
            return inspect::InspectOutput{std::move(report), std::move(rendered)};
        }
        case SelectorKind::Url: break;
    }
    throw_internal("unhandled selector kind");
}

}  // namespace cherenkov::store
