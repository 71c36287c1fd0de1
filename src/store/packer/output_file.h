// A file of known size written at planned offsets (pwrite), synced before publication.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/unique_fd.h"

namespace cherenkov::store {

class OutputFile {
public:
    // Creates (truncating) `path` and sizes it to `size_bytes`.
    OutputFile(std::string path, uint64_t size_bytes);

    void write_at(uint64_t offset, std::span<const std::byte> bytes);
    // fsync and close; throws Io on failure.
    void finish();
    const std::string& path() const { return path_; }

private:
    std::string path_;
    uint64_t size_bytes_ = 0;
    UniqueFd fd_;
};

}  // namespace cherenkov::store
