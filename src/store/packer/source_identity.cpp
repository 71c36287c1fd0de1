#include "store/packer/source_identity.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "base/error.h"
#include "base/file.h"
#include "store/packer/sha256.h"

namespace cherenkov::store {

namespace {

namespace fs = std::filesystem;

bool is_safetensors(const std::string& name) {
    return name.size() > 12 && name.compare(name.size() - 12, 12, ".safetensors") == 0;
}

// sha256 over the header of a safetensors file: its 8-byte little-endian length and the JSON.
std::string safetensors_header_sha256(const std::string& path) {
    const UniqueFd fd = open_read_only(path);
    const uint64_t size = file_size(fd.get(), path);
    std::byte length_bytes[8];
    pread_exact(fd.get(), length_bytes, 0, path);
    uint64_t header_bytes = 0;
    std::memcpy(&header_bytes, length_bytes, sizeof header_bytes);
    if (header_bytes > size - 8) {
        throw_corrupt(path + ": safetensors header of " + std::to_string(header_bytes) +
                      " bytes does not fit in the file");
    }
    std::vector<std::byte> header(header_bytes);
    pread_exact(fd.get(), header, 8, path);
    Sha256 hash;
    hash.update(length_bytes);
    hash.update(header);
    return hash.hex_digest();
}

const SourceFile* find_file(const SourceIdentity& identity, const std::string& name) {
    for (const SourceFile& file : identity.files) {
        if (file.name == name) return &file;
    }
    return nullptr;
}

bool has_hashes(const SourceIdentity& identity) {
    return std::any_of(identity.files.begin(), identity.files.end(), [](const SourceFile& file) {
        return file.sha256.has_value() || file.header_sha256.has_value();
    });
}

std::string join_names(const std::vector<std::string>& names) {
    std::string text;
    for (size_t index = 0; index < names.size() && index < 3; ++index) {
        text += (index == 0 ? "" : ", ") + names[index];
    }
    if (names.size() > 3) text += " and " + std::to_string(names.size() - 3) + " more";
    return text;
}

}  // namespace

SourceIdentity read_source_identity(const std::string& directory, const std::string& kind,
                                    const std::string& norm_convention) {
    SourceIdentity identity;
    identity.path = fs::absolute(directory).lexically_normal().string();
    identity.kind = kind;
    identity.norm_convention = norm_convention;
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(directory)) {
        const std::string name = entry.path().filename().string();
        if (is_safetensors(name) || name == "config.json" ||
            name == "model.safetensors.index.json") {
            names.push_back(name);
        }
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
        std::string full = directory;
        full += '/';
        full += name;
        struct stat info {};
        if (::stat(full.c_str(), &info) != 0) throw_errno("cannot stat " + full, errno);
        SourceFile file;
        file.name = name;
        file.size_bytes = static_cast<uint64_t>(info.st_size);
        file.mtime_ns =
            static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
        if (is_safetensors(name)) {
            file.header_sha256 = safetensors_header_sha256(full);
        } else {
            file.sha256 = sha256_of_file(full);
        }
        identity.files.push_back(std::move(file));
    }
    return identity;
}

std::optional<std::string> source_difference(const SourceIdentity& recorded,
                                             const SourceIdentity& current) {
    if (recorded.kind != current.kind) {
        return "different kind: " + current.kind + ", the store's is " + recorded.kind;
    }
    std::vector<std::string> missing;  // in the store's source, not in this one
    std::vector<std::string> extra;
    std::vector<std::string> changed;
    for (const SourceFile& file : recorded.files) {
        if (find_file(current, file.name) == nullptr) missing.push_back(file.name);
    }
    for (const SourceFile& file : current.files) {
        const SourceFile* before = find_file(recorded, file.name);
        if (before == nullptr) {
            extra.push_back(file.name);
            continue;
        }
        const bool same = has_hashes(recorded) ? before->sha256 == file.sha256 &&
                                                     before->header_sha256 == file.header_sha256
                                               : before->size_bytes == file.size_bytes;
        if (!same) {
            changed.push_back(is_safetensors(file.name) ? file.name + " header" : file.name);
        }
    }
    std::vector<std::string> parts;
    if (!changed.empty()) parts.push_back("different " + join_names(changed));
    if (!missing.empty()) parts.push_back(join_names(missing) + " missing");
    if (!extra.empty()) parts.push_back(join_names(extra) + " not in the store's source");
    if (parts.empty()) return std::nullopt;
    std::string text = parts[0];
    for (size_t index = 1; index < parts.size(); ++index) text += "; " + parts[index];
    return text;
}

}  // namespace cherenkov::store
