#include "store/index/model_index.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

std::string random_hex(size_t n_digits) {
    static const char* kHex = "0123456789abcdef";
    std::string bytes((n_digits + 1) / 2, '\0');
    UniqueFd fd(::open("/dev/urandom", O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) throw_errno("cannot open /dev/urandom", errno);
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::read(fd.get(), bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw_errno("cannot read /dev/urandom", errno);
        done += static_cast<size_t>(n);
    }
    std::string out;
    for (char byte : bytes) {
        out.push_back(kHex[(static_cast<unsigned char>(byte) >> 4) & 15]);
        out.push_back(kHex[static_cast<unsigned char>(byte) & 15]);
    }
    out.resize(n_digits);
    return out;
}

bool id_in_use(const Catalog& catalog, const std::string& id) {
    if (catalog.find_model(id) || catalog.find_artifact(id) || catalog.find_store_by_id(id))
        return true;
    for (const ModelEntry& model : catalog.models) {
        if (model.alias == id) return true;
    }
    return false;
}

std::string unique_id(const Catalog& catalog, size_t n_digits, const StoragePaths* paths) {
    while (true) {
        std::string id = random_hex(n_digits);
        if (id_in_use(catalog, id)) continue;
        // Never reuse a name that already exists on disk, even unrecorded (it is not ours).
        std::error_code ec;
        if (paths != nullptr && fs::exists(paths->artifact_dir(id), ec)) continue;
        return id;
    }
}

Catalog read_catalog_file(const StoragePaths& paths) {
    std::error_code ec;
    if (!fs::exists(paths.index_file(), ec)) return {};
    return parse_catalog(read_text_file(paths.index_file()), paths.index_file());
}

void make_directory(const std::string& path) {
    std::error_code ec;
    fs::create_directories(path, ec);
    if (ec) throw_io(path + ": cannot create directory: " + ec.message());
}

}  // namespace

ModelIndex::Snapshot ModelIndex::read() const {
    Snapshot snapshot;
    std::error_code ec;
    if (!fs::is_directory(paths_.data, ec)) return snapshot;
    try {
        snapshot.lock = FileLock::acquire(paths_.lock_file(), LockMode::Shared);
    } catch (const Error& error) {
        // A read-only data directory: index.json is replaced atomically, so reading it
        // unlocked still sees one whole version.
        if (error.kind() != ErrorKind::Io) throw;
    }
    snapshot.catalog = read_catalog_file(paths_);
    return snapshot;
}

ModelIndex::Transaction ModelIndex::begin() const {
    make_directory(paths_.data);
    make_directory(paths_.artifacts_dir());
    make_directory(paths_.leases_dir());
    FileLock lock = FileLock::acquire(paths_.lock_file(), LockMode::Exclusive);
    return Transaction(*this, std::move(lock), read_catalog_file(paths_));
}

void ModelIndex::Transaction::commit() {
    CHERENKOV_ASSERT(lock_.held(), "committing without the index lock");
    write_file_atomically(index_->paths_.index_file(), catalog_to_text(catalog_));
}

std::string ModelIndex::Transaction::new_model_id() const {
    return unique_id(catalog_, 12, nullptr);
}

std::string ModelIndex::Transaction::new_artifact_id() const {
    return unique_id(catalog_, 16, &index_->paths_);
}

std::string ModelIndex::Transaction::new_store_id() const {
    return unique_id(catalog_, 12, nullptr);
}

std::optional<FileLock> ModelIndex::try_lease(const std::string& artifact_id, LockMode mode) const {
    return FileLock::try_acquire(paths_.lease_file(artifact_id), mode);
}

FileLock ModelIndex::wait_lease(const std::string& artifact_id, LockMode mode) const {
    return FileLock::acquire(paths_.lease_file(artifact_id), mode);
}

ImportStart start_import(ModelIndex::Transaction& transaction, const ModelIndex& index,
                         ArtifactKind kind, const std::string& model_id) {
    Catalog& catalog = transaction.catalog();
    ImportStart start;
    for (Artifact& artifact : catalog.artifacts) {
        if (artifact.kind != kind || artifact.model_id != model_id ||
            artifact.state != ArtifactState::Importing || artifact.owner != Ownership::Managed) {
            continue;
        }
        std::optional<FileLock> lease = index.try_lease(artifact.id, LockMode::Exclusive);
        if (!lease) {
            start.busy_artifact = artifact.id;
            return start;
        }
        start.import =
            Import{artifact.id, index.paths().artifact_dir(artifact.id), std::move(*lease), true};
        return start;
    }
    Artifact artifact;
    artifact.id = transaction.new_artifact_id();
    artifact.kind = kind;
    artifact.owner = Ownership::Managed;
    artifact.state = ArtifactState::Importing;
    artifact.model_id = model_id;
    std::optional<FileLock> lease = index.try_lease(artifact.id, LockMode::Exclusive);
    CHERENKOV_ASSERT(lease.has_value(), "a new artifact's lease is held by someone");
    start.import =
        Import{artifact.id, index.paths().artifact_dir(artifact.id), std::move(*lease), false};
    catalog.artifacts.push_back(std::move(artifact));
    return start;
}

void abandon_import(const ModelIndex& index, Import& import) {
    {
        ModelIndex::Transaction transaction = index.begin();
        if (Artifact* artifact = transaction.catalog().find_artifact(import.artifact_id)) {
            artifact->state = ArtifactState::Deleting;
            transaction.commit();
        }
    }
    remove_artifact_files(index.paths(), import.artifact_id);
    ModelIndex::Transaction transaction = index.begin();
    transaction.catalog().remove_artifact(import.artifact_id);
    transaction.commit();
}

uint64_t directory_bytes(const std::string& directory) {
    uint64_t total = 0;
    std::error_code ec;
    if (!fs::is_directory(directory, ec)) return 0;
    for (fs::recursive_directory_iterator it(directory, ec), end; !ec && it != end;
         it.increment(ec)) {
        std::error_code size_ec;
        if (it->is_regular_file(size_ec) && !it->is_symlink(size_ec)) {
            const auto size = it->file_size(size_ec);
            if (!size_ec) total += size;
        }
    }
    return total;
}

void remove_artifact_files(const StoragePaths& paths, const std::string& artifact_id) {
    std::error_code ec;
    fs::remove_all(paths.artifact_dir(artifact_id), ec);
    if (ec) throw_io(paths.artifact_dir(artifact_id) + ": cannot remove: " + ec.message());
    const std::string prefix = "." + artifact_id + ".partial-";
    for (const auto& entry : fs::directory_iterator(paths.artifacts_dir(), ec)) {
        if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
        std::error_code remove_ec;
        fs::remove_all(entry.path(), remove_ec);
        if (remove_ec) throw_io(entry.path().string() + ": cannot remove: " + remove_ec.message());
    }
}

}  // namespace cherenkov::store
