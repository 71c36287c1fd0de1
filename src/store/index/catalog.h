// The model index's catalog, data/index.json (docs/model-index.md): filesystem stores, models
// (identity, alias, source, references to artifacts) and artifacts (owned or external
// directories, with their state). Ownership is explicit: only artifacts recorded as managed are
// ever deleted, whatever their location. Parsing rejects anything malformed or inconsistent,
// naming the file and the JSON field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::store {

inline constexpr std::string_view kCatalogFormat = "cherenkov-model-index";
inline constexpr int kCatalogVersion = 1;

enum class StoreLayout { Default, HfCache };  // ROOT/owner/repo | HF cache (models--o--r/...)

struct FsStore {
    std::string id;    // 12 hex; a new one each time a name is registered
    std::string name;  // used in disk://NAME/owner/repo
    std::string root;  // absolute
    StoreLayout layout = StoreLayout::Default;
    bool enabled = true;
};

enum class SourceKind {
    Hf,      // hf://owner/repo pinned to a commit
    Disk,    // disk://STORE/owner/repo[@commit], resolved to a path at registration
    Local,   // a checkpoint directory or file outside the index's ownership
    Packed,  // an existing packed store registered as input
};

struct ModelSource {
    SourceKind kind = SourceKind::Local;
    std::string endpoint;    // Hf: the Hub it came from (no credentials)
    std::string repo;        // Hf, Disk: owner/name
    std::string revision;    // Hf, Disk: what was asked for ("main", a tag), may be empty
    std::string commit;      // Hf: 40 hex; Disk (hf-cache layout): 40 hex, else empty
    std::string store_id;    // Disk
    std::string store_name;  // Disk: the name at registration (for display)
    std::string path;        // Disk, Local, Packed: absolute
};

enum class ArtifactKind { Store, Source, Description };
enum class Ownership { Managed, External };
enum class ArtifactState { Importing, Ready, Deleting };

struct Artifact {
    std::string
        id;  // 16 hex; a managed artifact lives in artifacts/<id>/, its lease in leases/<id>
    ArtifactKind kind = ArtifactKind::Store;
    Ownership owner = Ownership::Managed;
    ArtifactState state = ArtifactState::Importing;
    std::string path;      // External only: absolute
    std::string model_id;  // the model it was made for
};

struct ModelEntry {
    std::string id;     // 12 hex
    std::string alias;  // optional
    ModelSource source;
    std::string store_artifact;        // prepared store (Ready), optional
    std::string source_artifact;       // retained download (Ready), optional
    std::string description_artifact;  // source description saved at registration, optional
    // `prepare --output DIR` exports (external Ready stores) made while the model had a store:
    // recorded so gc keeps their records, never run from unless the model has no store.
    std::vector<std::string> export_artifacts;
    int64_t registered_unix = 0;
};

struct Catalog {
    std::vector<FsStore> stores;
    std::vector<ModelEntry> models;
    std::vector<Artifact> artifacts;

    const ModelEntry* find_model(std::string_view id) const;
    ModelEntry* find_model(std::string_view id);
    const Artifact* find_artifact(std::string_view id) const;
    Artifact* find_artifact(std::string_view id);
    const FsStore* find_store_by_name(std::string_view name) const;
    FsStore* find_store_by_name(std::string_view name);
    const FsStore* find_store_by_id(std::string_view id) const;
    // Artifact IDs some model refers to.
    std::vector<std::string> referenced_artifacts() const;
    void remove_artifact(std::string_view id);
};

std::string_view store_layout_name(StoreLayout layout);  // "default" | "hf-cache"
StoreLayout parse_store_layout(std::string_view text, const std::string& what);
std::string_view source_kind_name(SourceKind kind);
std::string_view artifact_kind_name(ArtifactKind kind);
std::string_view ownership_name(Ownership owner);
std::string_view artifact_state_name(ArtifactState state);

// The URI (or path) that selects this source again: hf://o/r@commit, disk://NAME/o/r[@commit].
std::string source_uri(const ModelSource& source);

// Throws InvalidInput naming `what` unless `alias` is 1-64 of [A-Za-z0-9._-], starting with a
// letter or digit, and not 12 hex digits (the form of a model ID).
void validate_alias(std::string_view alias, const std::string& what);
// Throws InvalidInput unless `name` is 1-64 of [A-Za-z0-9._-] starting with a letter or digit.
void validate_store_name(std::string_view name, const std::string& what);

Catalog parse_catalog(std::string_view text, const std::string& file);
std::string catalog_to_text(const Catalog& catalog);

}  // namespace cherenkov::store
