#include "store/index/register_model.h"

#include <ctime>
#include <filesystem>
#include <set>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file.h"
#include "model_data/hub/hub_repo.h"
#include "model_data/inspect/checkpoint_report.h"
#include "model_data/inspect/report_text.h"
#include "model_data/inspect/store_report.h"
#include "model_data/safetensors/safetensors_checkpoint.h"
#include "model_data/sources/observed_store.h"
#include "store/index/file_stores.h"
#include "store/index/model_lookup.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;
namespace hub = model_data::hub;
namespace inspect = model_data::inspect;
using nlohmann::json;

constexpr const char* kDescriptionName = "description.json";

// What registration found out about a source before touching the catalog.
struct Candidate {
    ModelSource source;
    inspect::InspectOutput description;
    std::string packed_store;     // a packed store directory serving as the model's store
    std::string reused_artifact;  // a managed store artifact being registered again
};

bool same_identity(const ModelSource& a, const ModelSource& b) {
    if (a.kind != b.kind) return false;
    if (a.kind == SourceKind::Hf) {
        return a.endpoint == b.endpoint && a.repo == b.repo && a.commit == b.commit;
    }
    return a.path == b.path;
}

const ModelEntry* find_identical(const Catalog& catalog, const Candidate& candidate) {
    for (const ModelEntry& model : catalog.models) {
        if (same_identity(model.source, candidate.source)) return &model;
        if (!candidate.reused_artifact.empty() &&
            model.store_artifact == candidate.reused_artifact) {
            return &model;
        }
    }
    return nullptr;
}

// Describes a remote commit with range reads, reporting header progress.
inspect::InspectOutput describe_hf(const hub::HubClient& client, const std::string& repo,
                                   const hub::RevisionInfo& revision, const IndexOptions& options) {
    emit_status(options, "reading config and shard index of hf://" + repo + "@" + revision.commit);
    std::unique_ptr<model_data::ObjectStore> store = client.open_snapshot(repo, revision.commit);
    uint64_t n_shards = 0;
    bool has_index = false;
    for (const hub::RepoFile& file : revision.files) {
        if (file.path == model_data::kShardIndexName) has_index = true;
    }
    if (has_index) {
        n_shards = model_data::parse_shard_index(
                       store->read_text(std::string(model_data::kShardIndexName)),
                       std::string(model_data::kShardIndexName))
                       .shard_names.size();
    } else {
        for (const hub::RepoFile& file : revision.files) {
            if (file.path.find('/') == std::string::npos && file.path.size() > 12 &&
                file.path.rfind(".safetensors") == file.path.size() - 12) {
                ++n_shards;
            }
        }
    }
    auto headers_read = std::make_shared<std::set<std::string>>();
    emit(options, IndexEvent{IndexEvent::Kind::Headers, "safetensors headers", 0, n_shards, 0, 0});
    auto observed = model_data::observe_reads(
        std::move(store),
        [&options, headers_read, n_shards](const std::string& object, uint64_t offset, uint64_t) {
            if (offset != 8 || object.size() < 12 ||
                object.rfind(".safetensors") != object.size() - 12) {
                return;
            }
            if (!headers_read->insert(object).second) return;
            emit(options, IndexEvent{IndexEvent::Kind::Headers, object, headers_read->size(),
                                     std::max<uint64_t>(n_shards, headers_read->size()), 0, 0});
        });
    json report = inspect::inspect_checkpoint(*observed);
    inspect::InspectOutput output;
    output.text = inspect::render_report_text(report);
    output.report = std::move(report);
    return output;
}

// For a file inside a checkpoint directory (config.json, a tokenizer file): the directory to
// name instead.
std::string checkpoint_hint(const std::string& file) {
    const fs::path directory = fs::path(file).parent_path();
    std::error_code ec;
    if (!fs::is_regular_file(directory / "config.json", ec)) return "";
    return " (the checkpoint is the directory " + directory.string() + ")";
}

Candidate candidate_from_path(const std::string& path, const IndexOptions& options) {
    Candidate candidate;
    candidate.source.path = path;
    const std::string artifacts = canonical_path(options.paths.artifacts_dir());
    if (path == artifacts || path.rfind(artifacts + "/", 0) == 0) {
        throw_invalid(path +
                      " is inside the managed artifacts directory; select the model by "
                      "alias or ID (cherenkov model list)");
    }
    std::error_code ec;
    if (!fs::exists(path, ec)) throw_not_found(path + ": no such file or directory");
    const std::string name = fs::path(path).filename().string();
    const auto ends_with = [&name](std::string_view suffix) {
        return name.size() >= suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (!fs::is_directory(path, ec) && !ends_with(".safetensors") && !ends_with(".gguf")) {
        throw_invalid(path + ": expected a checkpoint directory or a .safetensors or .gguf file" +
                      checkpoint_hint(path));
    }
    if (fs::is_directory(path, ec) && inspect::is_store_directory(path)) {
        candidate.source.kind = SourceKind::Packed;
        candidate.packed_store = path;
    } else {
        candidate.source.kind = SourceKind::Local;
    }
    emit_status(options, "inspecting " + path);
    candidate.description = inspect::inspect_target(path, model_data::HttpOptions{});
    return candidate;
}

// A path equal to artifacts/<id> of a recorded store registers that artifact again.
std::optional<Candidate> candidate_from_managed(const Catalog& catalog, const std::string& path,
                                                const IndexOptions& options) {
    const std::string artifacts = canonical_path(options.paths.artifacts_dir());
    if (path.rfind(artifacts + "/", 0) != 0) return std::nullopt;
    const std::string id = path.substr(artifacts.size() + 1);
    const Artifact* artifact = catalog.find_artifact(id);
    if (artifact == nullptr || artifact->kind != ArtifactKind::Store ||
        artifact->state != ArtifactState::Ready || artifact->owner != Ownership::Managed) {
        return std::nullopt;  // candidate_from_path rejects it
    }
    Candidate candidate;
    candidate.source.kind = SourceKind::Packed;
    candidate.source.path = path;
    candidate.reused_artifact = id;
    candidate.description = inspect::inspect_target(path, model_data::HttpOptions{});
    return candidate;
}

// Records `candidate` (or finds it recorded meanwhile) and sets the alias.
RegisteredModel record(const ModelIndex& index, const Candidate& candidate,
                       const std::string& alias) {
    ModelIndex::Transaction transaction = index.begin();
    Catalog& catalog = transaction.catalog();
    if (const ModelEntry* existing = find_identical(catalog, candidate)) {
        const std::string id = existing->id;
        if (!alias.empty()) {
            assign_alias(catalog, id, alias);
            transaction.commit();
        }
        return {id, false};
    }
    if (!candidate.reused_artifact.empty()) {
        const Artifact* artifact = catalog.find_artifact(candidate.reused_artifact);
        if (artifact == nullptr || artifact->state != ArtifactState::Ready) {
            throw Error(ErrorKind::Busy, candidate.source.path + " is being collected");
        }
    }
    ModelEntry model;
    model.id = transaction.new_model_id();
    model.source = candidate.source;
    model.registered_unix = static_cast<int64_t>(std::time(nullptr));
    // The description is written while the lock is held; the importing record makes a crash in
    // between collectable.
    Artifact description;
    description.id = transaction.new_artifact_id();
    description.kind = ArtifactKind::Description;
    description.state = ArtifactState::Importing;
    description.model_id = model.id;
    catalog.artifacts.push_back(description);
    transaction.commit();
    write_description(index.paths().artifact_dir(description.id), candidate.description);
    catalog.find_artifact(description.id)->state = ArtifactState::Ready;
    model.description_artifact = description.id;
    if (!candidate.reused_artifact.empty()) {
        model.store_artifact = candidate.reused_artifact;
    } else if (!candidate.packed_store.empty()) {
        Artifact store;
        store.id = transaction.new_artifact_id();
        store.kind = ArtifactKind::Store;
        store.owner = Ownership::External;
        store.state = ArtifactState::Ready;
        store.path = candidate.packed_store;
        store.model_id = model.id;
        catalog.artifacts.push_back(store);
        model.store_artifact = store.id;
    }
    catalog.models.push_back(model);
    if (!alias.empty()) assign_alias(catalog, model.id, alias);
    transaction.commit();
    return {model.id, true};
}

RegisteredModel register_hf(const ModelIndex& index, const HfUri& uri, const std::string& alias,
                            const IndexOptions& options) {
    const std::string revision = uri.revision.value_or("main");
    hub::HubClient client(options.hub);
    emit_status(options, "resolving hf://" + uri.repo + "@" + revision);
    const hub::RevisionInfo info = client.resolve_revision(uri.repo, revision);
    Candidate candidate;
    candidate.source.kind = SourceKind::Hf;
    candidate.source.endpoint = client.endpoint();
    candidate.source.repo = uri.repo;
    candidate.source.commit = info.commit;
    if (!hub::is_full_commit(revision)) candidate.source.revision = revision;
    if (const ModelEntry* existing = find_identical(index.load(), candidate)) {
        RegisteredModel found{existing->id, false};
        if (!alias.empty()) {
            ModelIndex::Transaction transaction = index.begin();
            assign_alias(transaction.catalog(), found.model_id, alias);
            transaction.commit();
        }
        return found;
    }
    try {
        candidate.description = describe_hf(client, uri.repo, info, options);
    } catch (const Error& error) {
        throw error.with_context("while describing hf://" + uri.repo + "@" + info.commit);
    }
    return record(index, candidate, alias);
}

RegisteredModel register_disk(const ModelIndex& index, const Catalog& catalog,
                              const Selector& selector, const std::string& alias,
                              const IndexOptions& options) {
    const FsStore* store = catalog.find_store_by_name(selector.disk.store);
    CHERENKOV_ASSERT(store != nullptr, "match_models checked the store");
    const DiskLocation location = locate_in_store(*store, selector.disk);
    Candidate candidate = candidate_from_path(canonical_path(location.path), options);
    candidate.source.kind = SourceKind::Disk;
    candidate.source.store_id = store->id;
    candidate.source.store_name = store->name;
    candidate.source.repo = selector.disk.repo;
    candidate.source.commit = location.commit;
    candidate.source.revision = location.revision;
    return record(index, candidate, alias);
}

}  // namespace

void assign_alias(Catalog& catalog, const std::string& model_id, const std::string& alias) {
    validate_alias(alias, "--name");
    for (const ModelEntry& model : catalog.models) {
        if (model.alias == alias && model.id != model_id) {
            throw_invalid("--name: alias '" + alias + "' already names model " + model.id +
                          " (remove it first or pick another name)");
        }
    }
    if (catalog.find_model(alias) != nullptr || catalog.find_artifact(alias) != nullptr) {
        throw_invalid("--name: '" + alias + "' is an ID");
    }
    ModelEntry* model = catalog.find_model(model_id);
    CHERENKOV_ASSERT(model != nullptr, "alias for an unknown model");
    model->alias = alias;
}

void write_description(const std::string& directory, const inspect::InspectOutput& description) {
    std::error_code ec;
    fs::create_directories(directory, ec);
    if (ec) throw_io(directory + ": cannot create directory: " + ec.message());
    const json document{{"report", description.report}, {"text", description.text}};
    write_file_atomically(directory + "/" + kDescriptionName,
                          document.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
}

inspect::InspectOutput read_description(const std::string& directory) {
    const std::string file = directory + "/" + kDescriptionName;
    json document;
    try {
        document = json::parse(read_text_file(file));
    } catch (const json::exception& error) {
        throw_corrupt(file + ": not valid JSON: " + error.what());
    }
    if (!document.is_object() || !document.contains("report") || !document.contains("text") ||
        !document["text"].is_string()) {
        throw_corrupt(file + ": expected {\"report\": ..., \"text\": ...}");
    }
    return inspect::InspectOutput{document["report"], document["text"].get<std::string>()};
}

RegisteredModel register_model(const ModelIndex& index, const Selector& selector,
                               const std::string& alias, const IndexOptions& options) {
    const Catalog catalog = index.load();
    const bool explicit_branch = selector.kind == SelectorKind::Hf && selector.hf.revision &&
                                 !is_commit_prefix(*selector.hf.revision);
    if (!explicit_branch) {
        if (const ModelEntry* model = match_one(catalog, selector, options.paths)) {
            const std::string id = model->id;
            if (!alias.empty()) {
                ModelIndex::Transaction transaction = index.begin();
                assign_alias(transaction.catalog(), id, alias);
                transaction.commit();
            }
            return {id, false};
        }
    }
    switch (selector.kind) {
        case SelectorKind::Name: {
            std::error_code ec;
            if (fs::exists(selector.name, ec)) {
                Selector as_path = selector;
                as_path.kind = SelectorKind::Path;
                as_path.path = "./" + selector.name;
                return register_model(index, as_path, alias, options);
            }
            throw_not_found("no indexed model has the alias or ID '" + selector.name +
                            "' (bare names never download; use hf://owner/repo)");
        }
        case SelectorKind::Hf: return register_hf(index, selector.hf, alias, options);
        case SelectorKind::Disk: return register_disk(index, catalog, selector, alias, options);
        case SelectorKind::Path: {
            const std::string path = canonical_path(selector.path);
            if (auto managed = candidate_from_managed(catalog, path, options)) {
                return record(index, *managed, alias);
            }
            return record(index, candidate_from_path(path, options), alias);
        }
        case SelectorKind::Url:
            throw_unsupported(selector.text +
                              ": register Hugging Face repositories as hf://owner/repo, or a "
                              "local path");
    }
    throw_internal("unhandled selector kind");
}

}  // namespace cherenkov::store
