#include "store/index/catalog.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "base/error.h"
#include "model_data/hub/hub_repo.h"

namespace cherenkov::store {
namespace {

using nlohmann::json;
namespace hub = model_data::hub;

bool is_lower_hex(std::string_view text, size_t length) {
    if (text.size() != length) return false;
    return std::all_of(text.begin(), text.end(),
                       [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Reads one JSON object's fields, naming "<file>: <pointer>" in every error and rejecting
// fields nobody asked for.
class ObjectReader {
public:
    ObjectReader(const json& object, std::string where)
        : object_(object), where_(std::move(where)) {
        if (!object_.is_object()) throw_corrupt(where_ + ": expected an object");
    }

    std::string string(const char* key, bool required = true) {
        seen_.insert(key);
        const auto it = object_.find(key);
        if (it == object_.end() || it->is_null()) {
            if (required) throw_corrupt(where_ + "/" + key + ": missing");
            return {};
        }
        if (!it->is_string()) throw_corrupt(where_ + "/" + key + ": expected a string");
        return it->get<std::string>();
    }

    bool boolean(const char* key) {
        seen_.insert(key);
        const auto it = object_.find(key);
        if (it == object_.end() || !it->is_boolean()) {
            throw_corrupt(where_ + "/" + key + ": expected true or false");
        }
        return it->get<bool>();
    }

    int64_t integer(const char* key) {
        seen_.insert(key);
        const auto it = object_.find(key);
        if (it == object_.end() || !it->is_number_integer()) {
            throw_corrupt(where_ + "/" + key + ": expected an integer");
        }
        return it->get<int64_t>();
    }

    const json& array(const char* key) {
        seen_.insert(key);
        const auto it = object_.find(key);
        if (it == object_.end() || !it->is_array()) {
            throw_corrupt(where_ + "/" + key + ": expected an array");
        }
        return *it;
    }

    const json& object(const char* key) {
        seen_.insert(key);
        const auto it = object_.find(key);
        if (it == object_.end() || !it->is_object()) {
            throw_corrupt(where_ + "/" + key + ": expected an object");
        }
        return *it;
    }

    const std::string& where() const { return where_; }
    bool has(const char* key) const { return object_.contains(key); }

    void finish() const {
        for (const auto& item : object_.items()) {
            if (seen_.count(item.key()) == 0) {
                throw_corrupt(where_ + "/" + item.key() + ": unknown field");
            }
        }
    }

private:
    const json& object_;
    std::string where_;
    std::set<std::string, std::less<>> seen_;
};

std::string absolute_path(ObjectReader& reader, const char* key, bool required = true) {
    std::string path = reader.string(key, required);
    if (path.empty() && !required) return path;
    if (path.empty() || path.front() != '/' || path.find('\0') != std::string::npos) {
        throw_corrupt(reader.where() + "/" + key + ": expected an absolute path");
    }
    return path;
}

std::string id_field(ObjectReader& reader, const char* key, size_t length, bool required) {
    std::string id = reader.string(key, required);
    if (id.empty() && !required) return id;
    if (!is_lower_hex(id, length)) {
        throw_corrupt(reader.where() + "/" + key + ": expected " + std::to_string(length) +
                      " lowercase hex digits");
    }
    return id;
}

template <typename Enum, size_t N>
Enum enum_field(ObjectReader& reader, const char* key,
                const std::pair<std::string_view, Enum> (&names)[N]) {
    const std::string text = reader.string(key);
    for (const auto& [name, value] : names) {
        if (text == name) return value;
    }
    std::string expected;
    for (const auto& entry : names)
        expected += (expected.empty() ? "" : ", ") + std::string(entry.first);
    throw_corrupt(reader.where() + "/" + key + ": '" + text + "' is not one of " + expected);
}

constexpr std::pair<std::string_view, StoreLayout> kLayouts[] = {
    {"default", StoreLayout::Default}, {"hf-cache", StoreLayout::HfCache}};
constexpr std::pair<std::string_view, SourceKind> kSourceKinds[] = {{"hf", SourceKind::Hf},
                                                                    {"disk", SourceKind::Disk},
                                                                    {"local", SourceKind::Local},
                                                                    {"packed", SourceKind::Packed}};
constexpr std::pair<std::string_view, ArtifactKind> kArtifactKinds[] = {
    {"store", ArtifactKind::Store},
    {"source", ArtifactKind::Source},
    {"description", ArtifactKind::Description}};
constexpr std::pair<std::string_view, Ownership> kOwners[] = {{"managed", Ownership::Managed},
                                                              {"external", Ownership::External}};
constexpr std::pair<std::string_view, ArtifactState> kStates[] = {
    {"importing", ArtifactState::Importing},
    {"ready", ArtifactState::Ready},
    {"deleting", ArtifactState::Deleting}};

template <typename Enum, size_t N>
std::string_view enum_name(Enum value, const std::pair<std::string_view, Enum> (&names)[N]) {
    for (const auto& [name, entry] : names) {
        if (entry == value) return name;
    }
    return "?";
}

// Runs a validator that throws InvalidInput and reports it as Corrupt at `where`.
template <typename F>
void as_corrupt(const std::string& where, F validate) {
    try {
        validate();
    } catch (const Error& error) {
        throw_corrupt(where + ": " + error.what());
    }
}

FsStore parse_store(const json& value, const std::string& where) {
    ObjectReader reader(value, where);
    FsStore store;
    store.id = id_field(reader, "id", 12, true);
    store.name = reader.string("name");
    as_corrupt(where + "/name", [&] { validate_store_name(store.name, "store name"); });
    store.root = absolute_path(reader, "root");
    store.layout = enum_field(reader, "layout", kLayouts);
    store.enabled = reader.boolean("enabled");
    reader.finish();
    return store;
}

ModelSource parse_source(const json& value, const std::string& where) {
    ObjectReader reader(value, where);
    ModelSource source;
    source.kind = enum_field(reader, "kind", kSourceKinds);
    switch (source.kind) {
        case SourceKind::Hf: {
            source.endpoint = reader.string("endpoint");
            as_corrupt(where + "/endpoint", [&] {
                if (hub::normalize_endpoint(source.endpoint) != source.endpoint)
                    throw_invalid("not a normalized http(s) endpoint");
            });
            source.repo = reader.string("repo");
            as_corrupt(where + "/repo", [&] { hub::validate_repo_id(source.repo, "repo"); });
            source.revision = reader.string("revision", false);
            if (!source.revision.empty()) {
                as_corrupt(where + "/revision",
                           [&] { hub::validate_revision(source.revision, "revision"); });
            }
            source.commit = reader.string("commit");
            if (!is_lower_hex(source.commit, 40)) {
                throw_corrupt(where + "/commit: expected 40 lowercase hex digits");
            }
            break;
        }
        case SourceKind::Disk: {
            source.store_id = id_field(reader, "store_id", 12, true);
            source.store_name = reader.string("store_name");
            as_corrupt(where + "/store_name",
                       [&] { validate_store_name(source.store_name, "store name"); });
            source.repo = reader.string("repo");
            as_corrupt(where + "/repo", [&] { hub::validate_repo_id(source.repo, "repo"); });
            source.revision = reader.string("revision", false);
            if (!source.revision.empty()) {
                as_corrupt(where + "/revision",
                           [&] { hub::validate_revision(source.revision, "revision"); });
            }
            source.commit = reader.string("commit", false);
            if (!source.commit.empty() && !is_lower_hex(source.commit, 40)) {
                throw_corrupt(where + "/commit: expected 40 lowercase hex digits");
            }
            source.path = absolute_path(reader, "path");
            break;
        }
        case SourceKind::Local:
        case SourceKind::Packed: source.path = absolute_path(reader, "path"); break;
    }
    reader.finish();
    return source;
}

Artifact parse_artifact(const json& value, const std::string& where) {
    ObjectReader reader(value, where);
    Artifact artifact;
    artifact.id = id_field(reader, "id", 16, true);
    artifact.kind = enum_field(reader, "kind", kArtifactKinds);
    artifact.owner = enum_field(reader, "owner", kOwners);
    artifact.state = enum_field(reader, "state", kStates);
    artifact.model_id = id_field(reader, "model", 12, true);
    if (artifact.owner == Ownership::External) {
        artifact.path = absolute_path(reader, "path");
        if (artifact.kind != ArtifactKind::Store) {
            throw_corrupt(where + "/owner: only stores can be external");
        }
    } else if (!reader.string("path", false).empty()) {
        throw_corrupt(where + "/path: managed artifacts live in artifacts/<id>; no path allowed");
    }
    reader.finish();
    return artifact;
}

ModelEntry parse_model(const json& value, const std::string& where) {
    ObjectReader reader(value, where);
    ModelEntry model;
    model.id = id_field(reader, "id", 12, true);
    model.alias = reader.string("alias", false);
    if (!model.alias.empty()) {
        as_corrupt(where + "/alias", [&] { validate_alias(model.alias, "alias"); });
    }
    model.source = parse_source(reader.object("source"), where + "/source");
    model.store_artifact = id_field(reader, "store", 16, false);
    model.source_artifact = id_field(reader, "retained_source", 16, false);
    model.description_artifact = id_field(reader, "description", 16, false);
    // Optional: catalogs written before exports were recorded have none.
    if (reader.has("exports")) {
        const json& exports = reader.array("exports");
        for (size_t index = 0; index < exports.size(); ++index) {
            const std::string where_export = where + "/exports/" + std::to_string(index);
            if (!exports[index].is_string() || !is_lower_hex(exports[index].get<std::string>(), 16))
                throw_corrupt(where_export + ": expected 16 lowercase hex digits");
            model.export_artifacts.push_back(exports[index].get<std::string>());
        }
    }
    model.registered_unix = reader.integer("registered");
    reader.finish();
    return model;
}

// Cross-references: unique IDs, aliases and names; every reference names a Ready artifact of
// the right kind made for that model.
void check_consistency(const Catalog& catalog, const std::string& file) {
    std::set<std::string> ids;
    std::set<std::string> names;
    for (size_t index = 0; index < catalog.stores.size(); ++index) {
        const FsStore& store = catalog.stores[index];
        const std::string where = file + ": /stores/" + std::to_string(index);
        if (!ids.insert(store.id).second) throw_corrupt(where + "/id: duplicate ID " + store.id);
        if (!names.insert(store.name).second) {
            throw_corrupt(where + "/name: duplicate store name " + store.name);
        }
    }
    for (size_t index = 0; index < catalog.artifacts.size(); ++index) {
        const Artifact& artifact = catalog.artifacts[index];
        if (!ids.insert(artifact.id).second) {
            throw_corrupt(file + ": /artifacts/" + std::to_string(index) + "/id: duplicate ID " +
                          artifact.id);
        }
    }
    std::set<std::string> aliases;
    std::set<std::string> referenced;
    for (size_t index = 0; index < catalog.models.size(); ++index) {
        const ModelEntry& model = catalog.models[index];
        const std::string where = file + ": /models/" + std::to_string(index);
        if (!ids.insert(model.id).second) throw_corrupt(where + "/id: duplicate ID " + model.id);
        if (!model.alias.empty() && !aliases.insert(model.alias).second) {
            throw_corrupt(where + "/alias: duplicate alias " + model.alias);
        }
        const std::pair<const std::string*, ArtifactKind> references[] = {
            {&model.store_artifact, ArtifactKind::Store},
            {&model.source_artifact, ArtifactKind::Source},
            {&model.description_artifact, ArtifactKind::Description}};
        std::vector<std::pair<const std::string*, ArtifactKind>> all(std::begin(references),
                                                                     std::end(references));
        for (const std::string& id : model.export_artifacts)
            all.emplace_back(&id, ArtifactKind::Store);
        for (const auto& [reference, kind] : all) {
            if (reference->empty()) continue;
            const Artifact* artifact = catalog.find_artifact(*reference);
            if (artifact == nullptr || artifact->kind != kind ||
                artifact->state != ArtifactState::Ready) {
                throw_corrupt(where + ": refers to artifact " + *reference +
                              ", which is not a ready " + std::string(artifact_kind_name(kind)));
            }
            if (!referenced.insert(*reference).second) {
                throw_corrupt(where + ": artifact " + *reference + " is referenced twice");
            }
        }
        for (const std::string& id : model.export_artifacts) {
            if (catalog.find_artifact(id)->owner != Ownership::External) {
                throw_corrupt(where + "/exports: artifact " + id +
                              " is managed; exports are external directories");
            }
        }
    }
    for (const ModelEntry& model : catalog.models) {
        if (!model.alias.empty() && ids.count(model.alias) != 0) {
            throw_corrupt(file + ": alias " + model.alias + " equals an ID");
        }
    }
}

json source_to_json(const ModelSource& source) {
    json out{{"kind", source_kind_name(source.kind)}};
    switch (source.kind) {
        case SourceKind::Hf:
            out["endpoint"] = source.endpoint;
            out["repo"] = source.repo;
            if (!source.revision.empty()) out["revision"] = source.revision;
            out["commit"] = source.commit;
            break;
        case SourceKind::Disk:
            out["store_id"] = source.store_id;
            out["store_name"] = source.store_name;
            out["repo"] = source.repo;
            if (!source.revision.empty()) out["revision"] = source.revision;
            if (!source.commit.empty()) out["commit"] = source.commit;
            out["path"] = source.path;
            break;
        case SourceKind::Local:
        case SourceKind::Packed: out["path"] = source.path; break;
    }
    return out;
}

bool valid_name(std::string_view name) {
    if (name.empty() || name.size() > 64) return false;
    if (std::isalnum(static_cast<unsigned char>(name.front())) == 0) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '.' || c == '_' || c == '-';
    });
}

}  // namespace

const ModelEntry* Catalog::find_model(std::string_view id) const {
    for (const ModelEntry& model : models) {
        if (model.id == id) return &model;
    }
    return nullptr;
}

ModelEntry* Catalog::find_model(std::string_view id) {
    return const_cast<ModelEntry*>(static_cast<const Catalog*>(this)->find_model(id));
}

const Artifact* Catalog::find_artifact(std::string_view id) const {
    for (const Artifact& artifact : artifacts) {
        if (artifact.id == id) return &artifact;
    }
    return nullptr;
}

Artifact* Catalog::find_artifact(std::string_view id) {
    return const_cast<Artifact*>(static_cast<const Catalog*>(this)->find_artifact(id));
}

const FsStore* Catalog::find_store_by_name(std::string_view name) const {
    for (const FsStore& store : stores) {
        if (store.name == name) return &store;
    }
    return nullptr;
}

FsStore* Catalog::find_store_by_name(std::string_view name) {
    return const_cast<FsStore*>(static_cast<const Catalog*>(this)->find_store_by_name(name));
}

const FsStore* Catalog::find_store_by_id(std::string_view id) const {
    for (const FsStore& store : stores) {
        if (store.id == id) return &store;
    }
    return nullptr;
}

std::vector<std::string> Catalog::referenced_artifacts() const {
    std::vector<std::string> out;
    for (const ModelEntry& model : models) {
        for (const std::string* id :
             {&model.store_artifact, &model.source_artifact, &model.description_artifact}) {
            if (!id->empty()) out.push_back(*id);
        }
        out.insert(out.end(), model.export_artifacts.begin(), model.export_artifacts.end());
    }
    return out;
}

void Catalog::remove_artifact(std::string_view id) {
    artifacts.erase(std::remove_if(artifacts.begin(), artifacts.end(),
                                   [&](const Artifact& artifact) { return artifact.id == id; }),
                    artifacts.end());
}

std::string_view store_layout_name(StoreLayout layout) {
    return enum_name(layout, kLayouts);
}
std::string_view source_kind_name(SourceKind kind) {
    return enum_name(kind, kSourceKinds);
}
std::string_view artifact_kind_name(ArtifactKind kind) {
    return enum_name(kind, kArtifactKinds);
}
std::string_view ownership_name(Ownership owner) {
    return enum_name(owner, kOwners);
}
std::string_view artifact_state_name(ArtifactState state) {
    return enum_name(state, kStates);
}

StoreLayout parse_store_layout(std::string_view text, const std::string& what) {
    for (const auto& [name, layout] : kLayouts) {
        if (text == name) return layout;
    }
    throw_invalid(what + ": layout '" + std::string(text) + "' is not default or hf-cache");
}

std::string source_uri(const ModelSource& source) {
    switch (source.kind) {
        case SourceKind::Hf: return "hf://" + source.repo + "@" + source.commit;
        case SourceKind::Disk:
            return "disk://" + source.store_name + "/" + source.repo +
                   (source.commit.empty() ? "" : "@" + source.commit);
        case SourceKind::Local:
        case SourceKind::Packed: return source.path;
    }
    return source.path;
}

void validate_alias(std::string_view alias, const std::string& what) {
    if (!valid_name(alias)) {
        throw_invalid(what + ": '" + std::string(alias) +
                      "' must be 1-64 letters, digits, '.', '_' or '-', starting with a letter "
                      "or digit");
    }
    if (is_lower_hex(alias, 12)) {
        throw_invalid(what + ": '" + std::string(alias) + "' looks like a model ID");
    }
}

void validate_store_name(std::string_view name, const std::string& what) {
    if (!valid_name(name)) {
        throw_invalid(what + ": '" + std::string(name) +
                      "' must be 1-64 letters, digits, '.', '_' or '-', starting with a letter "
                      "or digit");
    }
}

Catalog parse_catalog(std::string_view text, const std::string& file) {
    json document;
    try {
        document = json::parse(text);
    } catch (const json::exception& error) {
        throw_corrupt(file + ": not valid JSON: " + error.what());
    }
    ObjectReader reader(document, file + ": ");
    if (reader.string("format") != kCatalogFormat) {
        throw_corrupt(file + ": /format: expected \"" + std::string(kCatalogFormat) + "\"");
    }
    const int64_t version = reader.integer("version");
    if (version != kCatalogVersion) {
        throw_corrupt(file + ": /version: " + std::to_string(version) +
                      " is not supported (this build reads version " +
                      std::to_string(kCatalogVersion) + ")");
    }
    Catalog catalog;
    const json& stores = reader.array("stores");
    for (size_t index = 0; index < stores.size(); ++index) {
        catalog.stores.push_back(
            parse_store(stores[index], file + ": /stores/" + std::to_string(index)));
    }
    const json& models = reader.array("models");
    for (size_t index = 0; index < models.size(); ++index) {
        catalog.models.push_back(
            parse_model(models[index], file + ": /models/" + std::to_string(index)));
    }
    const json& artifacts = reader.array("artifacts");
    for (size_t index = 0; index < artifacts.size(); ++index) {
        catalog.artifacts.push_back(
            parse_artifact(artifacts[index], file + ": /artifacts/" + std::to_string(index)));
    }
    reader.finish();
    check_consistency(catalog, file);
    return catalog;
}

std::string catalog_to_text(const Catalog& catalog) {
    json stores = json::array();
    for (const FsStore& store : catalog.stores) {
        stores.push_back({{"id", store.id},
                          {"name", store.name},
                          {"root", store.root},
                          {"layout", store_layout_name(store.layout)},
                          {"enabled", store.enabled}});
    }
    json models = json::array();
    for (const ModelEntry& model : catalog.models) {
        json entry{{"id", model.id},
                   {"source", source_to_json(model.source)},
                   {"registered", model.registered_unix}};
        if (!model.alias.empty()) entry["alias"] = model.alias;
        if (!model.store_artifact.empty()) entry["store"] = model.store_artifact;
        if (!model.source_artifact.empty()) entry["retained_source"] = model.source_artifact;
        if (!model.description_artifact.empty()) entry["description"] = model.description_artifact;
        if (!model.export_artifacts.empty()) entry["exports"] = model.export_artifacts;
        models.push_back(std::move(entry));
    }
    json artifacts = json::array();
    for (const Artifact& artifact : catalog.artifacts) {
        json entry{{"id", artifact.id},
                   {"kind", artifact_kind_name(artifact.kind)},
                   {"owner", ownership_name(artifact.owner)},
                   {"state", artifact_state_name(artifact.state)},
                   {"model", artifact.model_id}};
        if (artifact.owner == Ownership::External) entry["path"] = artifact.path;
        artifacts.push_back(std::move(entry));
    }
    json document{{"format", kCatalogFormat},
                  {"version", kCatalogVersion},
                  {"stores", std::move(stores)},
                  {"models", std::move(models)},
                  {"artifacts", std::move(artifacts)}};
    return document.dump(1) + "\n";
}

}  // namespace cherenkov::store
