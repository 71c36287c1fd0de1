#include "engine/experts/record_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"
#include "base/file.h"
#include "base/log.h"

namespace cherenkov::engine {
namespace {

// O_DIRECT needs the offset, the length and the buffer aligned to the device's logical block;
// 4096 covers 512-byte and 4K-native drives, and expert records are 4096-aligned by format.
constexpr uint64_t kDirectAlign = 4096;

bool aligned_for_direct(std::span<std::byte> out, uint64_t offset) {
    return offset % kDirectAlign == 0 && out.size() % kDirectAlign == 0 &&
           reinterpret_cast<uintptr_t>(out.data()) % kDirectAlign == 0;
}

// pread until out is full, the file ends, or an error other than EINTR.
RecordRead pread_all(int fd, std::span<std::byte> out, uint64_t offset) {
    RecordRead result;
    while (result.n_bytes < out.size()) {
        const ssize_t n = ::pread(fd, out.data() + result.n_bytes, out.size() - result.n_bytes,
                                  static_cast<off_t>(offset + result.n_bytes));
        if (n < 0) {
            if (errno == EINTR) continue;
            result.error_number = errno;
            return result;
        }
        if (n == 0) return result;
        result.n_bytes += static_cast<uint64_t>(n);
    }
    return result;
}

}  // namespace

FileRecordReader::FileRecordReader(const std::string& path, DirectIo mode)
    : path_(path), buffered_fd_(open_read_only(path)) {
    size_bytes_ = file_size(buffered_fd_.get(), path_);
    if (mode == DirectIo::Off) return;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) {
        // tmpfs and some FUSE file systems refuse O_DIRECT at open (EINVAL); read buffered.
        log_debug("experts", path + ": O_DIRECT unavailable, reading through the page cache");
        return;
    }
    direct_fd_ = UniqueFd(fd);
    direct_enabled_.store(true, std::memory_order_relaxed);
}

RecordRead FileRecordReader::read(std::span<std::byte> out, uint64_t offset) {
    if (direct_enabled_.load(std::memory_order_relaxed) && aligned_for_direct(out, offset)) {
        RecordRead result = pread_all(direct_fd_.get(), out, offset);
        // Some file systems accept O_DIRECT at open and refuse it at read time.
        if (result.error_number != EINVAL) return result;
        direct_enabled_.store(false, std::memory_order_relaxed);
    }
    return pread_all(buffered_fd_.get(), out, offset);
}

std::unique_ptr<RecordReader> open_file_record_reader(const std::string& path, DirectIo mode) {
    return std::make_unique<FileRecordReader>(path, mode);
}

}  // namespace cherenkov::engine
