#include "store/index/file_stores.h"

#include <algorithm>
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "model_data/hub/hub_repo.h"
#include "store/index/model_lookup.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;
namespace hub = model_data::hub;

std::string lowercase(std::string text) {
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
}

DiskLocation locate_in_hf_cache(const FsStore& store, const DiskUri& uri, const std::string& what) {
    const fs::path repo_dir = fs::path(store.root) / hub::cache_folder_name(uri.repo);
    std::error_code ec;
    if (!fs::is_directory(repo_dir, ec)) {
        throw_not_found(
            what + ": " + repo_dir.string() +
            " is not in the cache (Cherenkov never downloads into a Hugging Face cache)");
    }
    const fs::path snapshots = repo_dir / "snapshots";
    DiskLocation location;
    const std::string revision = uri.revision.value_or("main");
    if (is_commit_prefix(revision)) {
        // A full commit or a prefix of at least 8 hex digits naming one cached snapshot.
        const std::string prefix = lowercase(revision);
        std::vector<std::string> matches;
        for (const auto& entry : fs::directory_iterator(snapshots, ec)) {
            const std::string name = entry.path().filename().string();
            if (hub::is_full_commit(name) && lowercase(name).rfind(prefix, 0) == 0) {
                matches.push_back(lowercase(name));
            }
        }
        if (matches.size() > 1) {
            throw_invalid(what + ": commit prefix " + revision + " matches " +
                          std::to_string(matches.size()) + " cached snapshots; give more digits");
        }
        if (matches.size() == 1) {
            location.commit = matches.front();
        } else if (revision.size() != 40) {
            // Not a cached commit; it may still name a ref such as a hex-looking tag.
            const fs::path ref = repo_dir / "refs" / revision;
            if (!fs::is_regular_file(ref, ec)) {
                throw_not_found(what + ": no cached snapshot starts with " + revision);
            }
            location.commit = parse_cache_ref(read_text_file(ref.string()), ref.string());
            location.revision = revision;
        } else {
            throw_not_found(what + ": commit " + revision + " is not in the cache");
        }
    } else {
        const fs::path ref = repo_dir / "refs" / revision;
        if (!fs::is_regular_file(ref, ec)) {
            throw_not_found(what + ": the cache has no ref '" + revision + "' (" + ref.string() +
                            ")");
        }
        location.commit = parse_cache_ref(read_text_file(ref.string()), ref.string());
        location.revision = revision;
    }
    const fs::path snapshot = snapshots / location.commit;
    if (!fs::is_directory(snapshot, ec)) {
        throw_not_found(what + ": snapshot " + snapshot.string() + " is missing from the cache");
    }
    location.path = snapshot.string();
    return location;
}

}  // namespace

DiskLocation locate_in_store(const FsStore& store, const DiskUri& uri) {
    const std::string what = "disk://" + uri.store + "/" + uri.repo +
                             (uri.revision ? "@" + *uri.revision : std::string());
    if (store.layout == StoreLayout::HfCache) return locate_in_hf_cache(store, uri, what);
    if (uri.revision) {
        throw_invalid(what + ": store '" + store.name +
                      "' uses the default layout (ROOT/owner/repo), which has no revisions");
    }
    const fs::path path = fs::path(store.root) / uri.repo;
    std::error_code ec;
    if (!fs::exists(path, ec)) throw_not_found(what + ": " + path.string() + " does not exist");
    return DiskLocation{path.string(), "", ""};
}

FsStore add_store(const ModelIndex& index, const std::string& name, const std::string& root,
                  StoreLayout layout) {
    validate_store_name(name, "store add");
    const std::string absolute = canonical_path(root);
    std::error_code ec;
    if (!fs::is_directory(absolute, ec)) {
        throw_not_found("store add " + name + ": " + absolute + " is not a directory");
    }
    ModelIndex::Transaction transaction = index.begin();
    Catalog& catalog = transaction.catalog();
    if (catalog.find_store_by_name(name) != nullptr) {
        throw_invalid("store add: a store named '" + name + "' is already registered");
    }
    FsStore store{transaction.new_store_id(), name, absolute, layout, true};
    catalog.stores.push_back(store);
    transaction.commit();
    return store;
}

void set_store_enabled(const ModelIndex& index, const std::string& name, bool enabled) {
    ModelIndex::Transaction transaction = index.begin();
    FsStore* store = transaction.catalog().find_store_by_name(name);
    if (store == nullptr) throw_not_found("no filesystem store named '" + name + "'");
    store->enabled = enabled;
    transaction.commit();
}

void remove_store(const ModelIndex& index, const std::string& name) {
    ModelIndex::Transaction transaction = index.begin();
    Catalog& catalog = transaction.catalog();
    const auto it = std::find_if(catalog.stores.begin(), catalog.stores.end(),
                                 [&](const FsStore& store) { return store.name == name; });
    if (it == catalog.stores.end()) throw_not_found("no filesystem store named '" + name + "'");
    catalog.stores.erase(it);
    transaction.commit();
}

}  // namespace cherenkov::store
