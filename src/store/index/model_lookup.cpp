#include "store/index/model_lookup.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "base/error.h"
#include "model_data/hub/hub_repo.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

std::string lowercase(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

// A revision given with a URI against a model's recorded commit and revision.
bool revision_matches(const std::optional<std::string>& wanted, const ModelSource& source) {
    if (!wanted) return true;
    const std::string& revision = *wanted;
    if (is_commit_prefix(revision) && !source.commit.empty() &&
        source.commit.rfind(lowercase(revision), 0) == 0) {
        return true;
    }
    return !source.revision.empty() && source.revision == revision;
}

bool path_matches(const ModelEntry& model, const Catalog& catalog, const std::string& path,
                  const StoragePaths& paths) {
    if (model.source.kind != SourceKind::Hf && model.source.path == path) return true;
    if (model.store_artifact.empty()) return false;
    const Artifact* store = catalog.find_artifact(model.store_artifact);
    return store != nullptr && artifact_location(*store, paths) == path;
}

}  // namespace

std::string canonical_path(const std::string& path) {
    std::error_code ec;
    fs::path absolute = fs::absolute(path, ec);
    if (ec) throw_invalid(path + ": cannot make the path absolute: " + ec.message());
    fs::path canonical = fs::weakly_canonical(absolute, ec);
    if (ec) canonical = absolute.lexically_normal();
    std::string text = canonical.string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    return text;
}

std::string artifact_location(const Artifact& artifact, const StoragePaths& paths) {
    return artifact.owner == Ownership::External ? artifact.path : paths.artifact_dir(artifact.id);
}

std::string model_reference(const ModelEntry& model) {
    return model.alias.empty() ? model.id : model.alias;
}

std::vector<const ModelEntry*> match_models(const Catalog& catalog, const Selector& selector,
                                            const StoragePaths& paths) {
    std::vector<const ModelEntry*> out;
    switch (selector.kind) {
        case SelectorKind::Name: {
            for (const ModelEntry& model : catalog.models) {
                if (model.alias == selector.name) return {&model};
            }
            if (const ModelEntry* model = catalog.find_model(selector.name)) return {model};
            if (!is_commit_prefix(selector.name)) return {};
            const std::string prefix = lowercase(selector.name);
            for (const ModelEntry& model : catalog.models) {
                if (!model.source.commit.empty() && model.source.commit.rfind(prefix, 0) == 0) {
                    out.push_back(&model);
                }
            }
            return out;
        }
        case SelectorKind::Hf:
            for (const ModelEntry& model : catalog.models) {
                if (model.source.kind == SourceKind::Hf && model.source.repo == selector.hf.repo &&
                    revision_matches(selector.hf.revision, model.source)) {
                    out.push_back(&model);
                }
            }
            return out;
        case SelectorKind::Disk: {
            const FsStore* store = catalog.find_store_by_name(selector.disk.store);
            if (store == nullptr) {
                throw_not_found(selector.text + ": no filesystem store named '" +
                                selector.disk.store + "' (see cherenkov store list)");
            }
            if (!store->enabled) {
                throw_invalid(selector.text + ": store '" + store->name +
                              "' is disabled (cherenkov store enable " + store->name + ")");
            }
            for (const ModelEntry& model : catalog.models) {
                if (model.source.kind == SourceKind::Disk && model.source.store_id == store->id &&
                    model.source.repo == selector.disk.repo &&
                    revision_matches(selector.disk.revision, model.source)) {
                    out.push_back(&model);
                }
            }
            return out;
        }
        case SelectorKind::Path: {
            const std::string path = canonical_path(selector.path);
            for (const ModelEntry& model : catalog.models) {
                if (path_matches(model, catalog, path, paths)) out.push_back(&model);
            }
            return out;
        }
        case SelectorKind::Url: return {};
    }
    return out;
}

const ModelEntry* match_one(const Catalog& catalog, const Selector& selector,
                            const StoragePaths& paths) {
    const std::vector<const ModelEntry*> matches = match_models(catalog, selector, paths);
    if (matches.empty()) return nullptr;
    if (matches.size() == 1) return matches.front();
    std::string candidates;
    for (const ModelEntry* model : matches) {
        candidates += "\n  " + model_reference(*model) + "  " + source_uri(model->source);
    }
    throw_invalid(selector.text + " matches " + std::to_string(matches.size()) +
                  " indexed models; specify @commit, an alias or an ID:" + candidates);
}

}  // namespace cherenkov::store
