#include "store/store_update.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file.h"
#include "base/log.h"
#include "store/lowbit/lowbit_store.h"
#include "store/store_check.h"

namespace cherenkov::store {
namespace {

namespace fs = std::filesystem;

bool is_file(const fs::path& path) {
    std::error_code ec;
    return fs::is_regular_file(path, ec);
}

bool contains(const std::vector<int>& values, int value) {
    return std::find(values.begin(), values.end(), value) != values.end();
}

// Files of the old store the change replaces, which are therefore not linked into the new one:
// the tables being rebuilt (an invalid table of a requested width) and their manifests.
bool replaced_by(const StoreChanges& changes, const std::string& name) {
    for (int bits : changes.missing_bits) {
        if (name == lowbit_experts_name(bits) || name == lowbit_manifest_name(bits)) return true;
    }
    return std::find(changes.missing_metadata.begin(), changes.missing_metadata.end(), name) !=
           changes.missing_metadata.end();
}

void fsync_file(const std::string& path) {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid() || ::fsync(fd.get()) != 0) throw_errno("cannot sync " + path, errno);
}

// A hard link to `from` at `to`; a synced copy where the file system cannot link (another
// file system, or one without hard links).
void link_or_copy(const fs::path& from, const fs::path& to) {
    std::error_code ec;
    fs::create_hard_link(from, to, ec);
    if (!ec) return;
    const std::error_code link_error = ec;
    fs::copy_file(from, to, ec);
    if (ec) {
        throw_io("cannot link or copy " + from.string() + " to " + to.string() + ": " +
                 link_error.message() + "; " + ec.message());
    }
    fsync_file(to.string());
}

void repair_metadata(const std::string& store_dir, const StoreChanges& changes,
                     const std::string& source) {
    for (const std::string& name : changes.missing_metadata) {
        const std::string from = source + "/" + name;
        std::string text = read_text_file(from);
        if (name == "config.json") text = packed_config_text(text, changes.manifest.has_mtp, from);
        write_file_atomically(store_dir + "/" + name, text);
        log_info("store", "repaired " + store_dir + "/" + name + " from " + source);
    }
}

}  // namespace

StoreChanges plan_store_changes(const std::string& store_dir, std::span<const int> expert_bits,
                                const std::string& metadata_source,
                                std::span<const int> rebuild_bits) {
    StoreChanges changes;
    if (!metadata_source.empty()) {
        for (const char* name : kStoreMetadataFiles) {
            if (!is_file(fs::path(store_dir) / name) && is_file(fs::path(metadata_source) / name))
                changes.missing_metadata.emplace_back(name);
        }
    }
    changes.manifest = validate_store_files(store_dir);
    // A config.json about to be repaired is checked once it is there (apply_store_changes).
    if (std::find(changes.missing_metadata.begin(), changes.missing_metadata.end(),
                  "config.json") == changes.missing_metadata.end()) {
        validate_store_config(store_dir, changes.manifest);
    }
    for (int bits : expert_bits) {
        if (bits == 4 || contains(changes.missing_bits, bits) || contains(changes.valid_bits, bits))
            continue;
        if (std::find(rebuild_bits.begin(), rebuild_bits.end(), bits) != rebuild_bits.end()) {
            log_info("store", "rebuilding " + lowbit_experts_name(bits) + " (--repack)");
            changes.missing_bits.push_back(bits);
            continue;
        }
        try {
            validate_lowbit_store(store_dir, bits, changes.manifest);
            changes.valid_bits.push_back(bits);
        } catch (const Error& error) {
            if (error.kind() != ErrorKind::NotFound) {
                log_warn("store", "rebuilding " + lowbit_experts_name(bits) + ": " + error.what());
            }
            changes.missing_bits.push_back(bits);
        }
    }
    return changes;
}

void apply_store_changes(const std::string& store_dir, const StoreChanges& changes,
                         const StoreChangeOptions& options) {
    repair_metadata(store_dir, changes, options.metadata_source);
    if (!changes.missing_metadata.empty()) validate_store_config(store_dir, changes.manifest);
    derive_lowbit_stores(store_dir, changes.manifest, changes.missing_bits, options.n_threads,
                         options.progress);
}

void publish_changed_store(const std::string& from, const std::string& to,
                           const StoreChanges& changes, const StoreChangeOptions& options) {
    std::error_code ec;
    if (fs::exists(to, ec))
        throw_invalid(to + ": already exists; a changed store is published new");
    remove_stale_partials(to);
    const std::string temp = partial_path(to);
    if (!fs::create_directory(temp, ec) || ec) {
        throw_io(temp + ": cannot create the temporary store directory: " + ec.message());
    }
    try {
        for (const fs::directory_entry& entry : fs::directory_iterator(from)) {
            const std::string name = entry.path().filename().string();
            // Stores are flat; temporary files of a running writer are not part of the store.
            if (!entry.is_regular_file() || name.find(".partial-") != std::string::npos ||
                name.find(".tmp-") != std::string::npos || replaced_by(changes, name)) {
                continue;
            }
            link_or_copy(entry.path(), fs::path(temp) / name);
        }
        apply_store_changes(temp, changes, options);
        validate_store(temp);
        for (int bits : changes.missing_bits) validate_lowbit_store(temp, bits, changes.manifest);
        sync_parent_directory(temp + "/" + std::string(kManifestName));
        if (::rename(temp.c_str(), to.c_str()) != 0) throw_errno("cannot publish " + to, errno);
        sync_parent_directory(to);
    } catch (const Error& error) {
        fs::remove_all(temp, ec);
        throw error.with_context("while publishing a changed copy of " + from);
    } catch (...) {
        fs::remove_all(temp, ec);
        throw;
    }
}

}  // namespace cherenkov::store
