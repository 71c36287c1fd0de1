// Byte sources: one interface over local files (pread, optional mmap) and HTTP range reads,
// so the containers above them (safetensors, GGUF) read headers the same way from either.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/file.h"

namespace cherenkov::model_data {

// One readable object (a file, a remote file). Reads are exact: a read past the end throws
// Corrupt naming the object. Implementations are safe to read from several threads.
class ByteSource {
public:
    virtual ~ByteSource() = default;

    // The path or URL, used in every error message about this object.
    virtual const std::string& name() const = 0;
    virtual uint64_t size() const = 0;
    virtual void read(uint64_t offset, std::span<std::byte> out) const = 0;

    // A mapping of the whole object when the source is a local file; views taken from it stay
    // valid while the returned pointer (or a copy) lives, even after the source is dropped.
    virtual std::shared_ptr<const MappedFile> mapping() const { return nullptr; }

    // Reads [offset, offset + n_bytes) into a new buffer, checking the range against size().
    std::vector<std::byte> read_range(uint64_t offset, uint64_t n_bytes) const;
};

// A directory-like collection of objects addressed by relative names ("config.json",
// "model-00001-of-00002.safetensors"): a local directory or a remote repository snapshot.
class ObjectStore {
public:
    virtual ~ObjectStore() = default;

    // Where the objects live (a directory path or a base URL), for messages.
    virtual const std::string& location() const = 0;
    virtual bool exists(const std::string& relative_name) const = 0;
    // Throws NotFound naming the object when it does not exist.
    virtual std::unique_ptr<ByteSource> open(const std::string& relative_name) const = 0;
    // Names of the objects directly in the store, when it can list them (local directories).
    virtual std::optional<std::vector<std::string>> list() const = 0;

    std::string read_text(const std::string& relative_name) const;
};

std::unique_ptr<ByteSource> open_file_source(const std::string& path);
std::unique_ptr<ObjectStore> open_directory_store(const std::string& directory);

}  // namespace cherenkov::model_data
