// The model index on disk (docs/model-index.md): data/index.json replaced atomically under
// data/index.lock, managed artifacts in data/artifacts/<id>/, leases in data/leases/<id>.
// Readers take the index lock shared, writers exclusively; artifact leases are taken shared by
// readers of a store and exclusively by imports and collection. Lock files are never deleted.
#pragma once

#include <optional>
#include <string>

#include "base/file_lock.h"
#include "store/index/catalog.h"
#include "store/index/storage_paths.h"

namespace cherenkov::store {

class ModelIndex {
public:
    explicit ModelIndex(StoragePaths paths) : paths_(std::move(paths)) {}

    const StoragePaths& paths() const { return paths_; }

    // A catalog read under the shared index lock, which `lock` keeps held (unheld when the data
    // directory does not exist: an absent index reads as empty and nothing is created).
    struct Snapshot {
        Catalog catalog;
        FileLock lock;
    };
    Snapshot read() const;
    Catalog load() const { return read().catalog; }

    // The exclusive index lock plus the catalog read under it. commit() publishes the catalog
    // (temp + fsync + rename + directory fsync); the lock is released on destruction.
    class Transaction {
    public:
        Catalog& catalog() { return catalog_; }
        void commit();
        std::string new_model_id() const;
        std::string new_artifact_id() const;
        std::string new_store_id() const;

    private:
        friend class ModelIndex;
        Transaction(const ModelIndex& index, FileLock lock, Catalog catalog)
            : index_(&index), lock_(std::move(lock)), catalog_(std::move(catalog)) {}

        const ModelIndex* index_;
        FileLock lock_;
        Catalog catalog_;
    };
    // Creates data/, artifacts/ and leases/ when missing.
    Transaction begin() const;

    // The lease of an artifact; nullopt when a conflicting holder has it.
    [[nodiscard]] std::optional<FileLock> try_lease(const std::string& artifact_id,
                                                    LockMode mode) const;
    // Waits for the lease.
    FileLock wait_lease(const std::string& artifact_id, LockMode mode) const;

private:
    StoragePaths paths_;
};

// An import in progress: a managed artifact recorded as importing, whose directory the holder
// fills while keeping the lease exclusively. If the holder dies, the lease frees and `model gc`
// (or the next import of the same kind for the same model) takes the artifact over.
struct Import {
    std::string artifact_id;
    std::string dir;
    FileLock lease;
    bool adopted = false;  // continues an abandoned import's files
};

struct ImportStart {
    std::optional<Import> import;  // started or adopted; the transaction must be committed
    std::string busy_artifact;     // else: another live process imports this artifact
};

// Adopts an abandoned import of `kind` for `model_id` (its lease free), reports a live one,
// or records a new one. Never blocks.
ImportStart start_import(ModelIndex::Transaction& transaction, const ModelIndex& index,
                         ArtifactKind kind, const std::string& model_id);

// Drops an import this process gave up on: marked deleting, files removed, record dropped.
void abandon_import(const ModelIndex& index, Import& import);

// Sum of the lengths of the regular files under `directory` (symlinks not followed); 0 when absent.
uint64_t directory_bytes(const std::string& directory);

// Removes a managed artifact's directory and any packer leftovers beside it
// (artifacts/.<id>.partial-*). Missing files are fine.
void remove_artifact_files(const StoragePaths& paths, const std::string& artifact_id);

}  // namespace cherenkov::store
