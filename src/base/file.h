// Plain file access: open, size, positional reads that retry on EINTR and short reads,
// and read-only memory mappings shared between holders.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "base/unique_fd.h"

namespace cherenkov {

// Opens `path` read-only; throws NotFound or Io naming the path.
UniqueFd open_read_only(const std::string& path);

uint64_t file_size(int fd, const std::string& path);

// Reads exactly out.size() bytes at `offset`; throws Corrupt naming `path` when the file ends
// first, Io on a read error.
void pread_exact(int fd, std::span<std::byte> out, uint64_t offset, const std::string& path);

std::string read_text_file(const std::string& path);

// A read-only mapping of a whole file. Views into it stay valid while any
// shared_ptr<const MappedFile> lives; the file must not be modified meanwhile.
class MappedFile {
public:
    // shared: MAP_SHARED, whose pages are the page cache's own (a device driver can lock them
    // in place); else MAP_PRIVATE. For a file nobody writes the bytes are the same.
    static std::shared_ptr<const MappedFile> open(const std::string& path, bool shared = false);
    ~MappedFile();

    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    std::span<const std::byte> bytes() const { return {data_, size_}; }
    const std::string& path() const { return path_; }

private:
    MappedFile(std::string path, const std::byte* data, size_t size)
        : path_(std::move(path)), data_(data), size_(size) {}

    std::string path_;
    const std::byte* data_;
    size_t size_;
};

}  // namespace cherenkov
