// A file of known size written at planned offsets (pwrite), synced before publication.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/unique_fd.h"

namespace cherenkov::store {

// How writes reach the file. DirectWhenAligned sends writes whose offset, size and buffer are
// multiples of kDirectAlign through an O_DIRECT descriptor (no copy into the page cache, which
// costs more CPU than the computation on a new file of many GB) and the rest through the page
// cache; file systems without O_DIRECT (tmpfs) get buffered writes only.
enum class OutputMode { Buffered, DirectWhenAligned };

class OutputFile {
public:
    static constexpr uint64_t kDirectAlign = 4096;

    // Creates (truncating) `path` and sizes it to `size_bytes`.
    OutputFile(std::string path, uint64_t size_bytes, OutputMode mode = OutputMode::Buffered);

    void write_at(uint64_t offset, std::span<const std::byte> bytes);
    // fsync and close; throws Io on failure.
    void finish();
    const std::string& path() const { return path_; }

private:
    std::string path_;
    uint64_t size_bytes_ = 0;
    UniqueFd fd_;
    UniqueFd direct_fd_;  // valid in DirectWhenAligned mode where O_DIRECT is supported
};

}  // namespace cherenkov::store
