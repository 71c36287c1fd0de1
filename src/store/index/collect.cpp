#include "store/index/collect.h"

#include <filesystem>
#include <map>

#include "base/error.h"
#include "base/file_lock.h"
#include "store/index/model_index.h"
#include "store/index/model_lookup.h"
#include "store/store_check.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

std::string_view action_name(GcAction action) {
    switch (action) {
        case GcAction::Delete: return "delete";
        case GcAction::Forget: return "forget";
        case GcAction::Skip: return "skip";
    }
    return "skip";
}

// index.json.tmp-<pid> files of writers that died mid-publish (the lock is ours, so no writer
// is live).
void remove_stale_index_temps(const StoragePaths& paths) {
    const std::string prefix = "index.json.tmp-";
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(paths.data, ec)) {
        if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
        fs::remove(entry.path(), ec);
    }
}

}  // namespace

GcReport collect_garbage(const IndexOptions& options, bool dry_run) {
    GcReport report;
    report.dry_run = dry_run;
    std::error_code ec;
    if (!fs::is_directory(options.paths.data, ec)) return report;
    const ModelIndex index(options.paths);
    std::map<std::string, FileLock> leases;  // held until the plan is carried out
    std::vector<GcItem> plan;
    {
        ModelIndex::Transaction transaction = index.begin();
        Catalog& catalog = transaction.catalog();
        plan = plan_gc(catalog, [&](const std::string& id) {
            std::optional<FileLock> lease = index.try_lease(id, LockMode::Exclusive);
            if (!lease) return false;
            leases.emplace(id, std::move(*lease));
            return true;
        });
        for (const GcItem& item : plan) {
            const Artifact* artifact = catalog.find_artifact(item.artifact_id);
            const std::string path = artifact_location(*artifact, options.paths);
            GcReportItem line{item.artifact_id,
                              std::string(artifact_kind_name(item.kind)),
                              std::string(ownership_name(item.owner)),
                              path,
                              std::string(action_name(item.action)),
                              item.reason,
                              directory_bytes(path)};
            if (item.action == GcAction::Delete) report.bytes_freed += line.bytes;
            report.items.push_back(std::move(line));
        }
        if (dry_run) return report;
        remove_stale_index_temps(options.paths);
        for (const GcItem& item : plan) {
            if (item.action == GcAction::Delete) {
                catalog.find_artifact(item.artifact_id)->state = ArtifactState::Deleting;
            } else if (item.action == GcAction::Forget) {
                catalog.remove_artifact(item.artifact_id);
            }
        }
        transaction.commit();
    }
    for (const GcReportItem& item : report.items) {
        if (item.action != "delete") continue;
        emit_status(options, "removing " + item.kind + " " + item.artifact_id + " (" + item.reason +
                                 ", " + std::to_string(item.bytes) + " bytes)");
        remove_artifact_files(options.paths, item.artifact_id);
        ModelIndex::Transaction transaction = index.begin();
        transaction.catalog().remove_artifact(item.artifact_id);
        transaction.commit();
    }
    return report;
}

RemoveReport remove_model(const IndexOptions& options, const std::string& text, bool source_only) {
    const Selector selector = parse_selector(text);
    const ModelIndex index(options.paths);
    ModelIndex::Transaction transaction = index.begin();
    Catalog& catalog = transaction.catalog();
    const ModelEntry* match = match_one(catalog, selector, options.paths);
    if (match == nullptr) throw_not_found(text + " does not select an indexed model");
    ModelEntry& model = *catalog.find_model(match->id);
    RemoveReport report{model.id, model_reference(model), source_only, {}};
    if (source_only) {
        if (model.source_artifact.empty()) {
            throw_invalid(report.reference + " has no retained source copy");
        }
        if (model.store_artifact.empty()) {
            throw_invalid(report.reference +
                          " is not prepared; its retained source is the only copy (prepare it "
                          "first)");
        }
        const Artifact* store = catalog.find_artifact(model.store_artifact);
        const std::string store_dir = artifact_location(*store, options.paths);
        try {
            validate_store(store_dir);
        } catch (const Error& error) {
            throw error.with_context("keeping the retained source of " + report.reference +
                                     ": its prepared store does not check out");
        }
        report.released_artifacts.push_back(model.source_artifact);
        model.source_artifact.clear();
    } else {
        for (const std::string* id :
             {&model.store_artifact, &model.source_artifact, &model.description_artifact}) {
            if (!id->empty()) report.released_artifacts.push_back(*id);
        }
        report.released_artifacts.insert(report.released_artifacts.end(),
                                         model.export_artifacts.begin(),
                                         model.export_artifacts.end());
        const std::string id = model.id;
        std::erase_if(catalog.models, [&](const ModelEntry& entry) { return entry.id == id; });
    }
    transaction.commit();
    return report;
}

}  // namespace cherenkov::store
