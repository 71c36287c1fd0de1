// Positional reads of whole expert records from one table file. The cache's IO workers read
// through this interface so tests can inject read errors and short reads. FileRecordReader reads
// with O_DIRECT (bypassing the page cache) when the offset, length and buffer are aligned, and
// falls back to buffered reads when the file system refuses O_DIRECT. Buffered reads can leave
// the destination out of the CPU caches (BufferedFill::NonTemporal), for records a device then
// copies by DMA.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "base/unique_fd.h"

namespace cherenkov::engine {

enum class DirectIo {
    Auto,  // O_DIRECT when possible, buffered otherwise
    Off,   // always buffered (through the page cache)
};

// How a buffered read fills the destination. Cached: pread straight into it, which leaves its
// lines dirty in the CPU caches; a DMA engine reading them then snoops every line (host to device
// copies of a freshly read 2.76 MB record ran at 28-31 GB/s against 52 from clean memory, H200
// machine, dev/cuda/02_host_copy_probe). NonTemporal: pread into a small per-thread buffer that
// stays in cache, then copy with non-temporal stores, so the destination is clean in memory (58-60
// µs per record in the same probe). Not for records the CPU reads next: those would come from DRAM.
enum class BufferedFill {
    Cached,
    NonTemporal,
};

// Outcome of one read: bytes actually placed in the buffer and, on failure, the errno.
// n_bytes < requested with error_number 0 is a short read (the file ended).
struct RecordRead {
    uint64_t n_bytes = 0;
    int error_number = 0;
};

class RecordReader {
public:
    virtual ~RecordReader() = default;
    // Reads out.size() bytes at `offset`, retrying interrupted and partial reads. Never throws;
    // safe to call from several threads at once.
    virtual RecordRead read(std::span<std::byte> out, uint64_t offset) = 0;
    virtual uint64_t size_bytes() const = 0;
    virtual const std::string& path() const = 0;
    // True while reads bypass the page cache.
    virtual bool direct() const = 0;
};

class FileRecordReader final : public RecordReader {
public:
    // Opens `path` buffered, and a second descriptor with O_DIRECT unless `mode` is Off or the file
    // system refuses it. Throws NotFound / Io naming the path.
    FileRecordReader(const std::string& path, DirectIo mode,
                     BufferedFill fill = BufferedFill::Cached);

    RecordRead read(std::span<std::byte> out, uint64_t offset) override;
    uint64_t size_bytes() const override { return size_bytes_; }
    const std::string& path() const override { return path_; }
    bool direct() const override { return direct_enabled_.load(std::memory_order_relaxed); }

private:
    std::string path_;
    UniqueFd buffered_fd_;
    UniqueFd direct_fd_;  // invalid when O_DIRECT is off or unsupported
    std::atomic<bool> direct_enabled_{false};
    uint64_t size_bytes_ = 0;
    BufferedFill fill_ = BufferedFill::Cached;
};

// Opens a reader for a table file; the cache takes one in its options so tests can wrap the file
// reader with fault injection.
using RecordReaderFactory =
    std::function<std::unique_ptr<RecordReader>(const std::string& path, DirectIo mode)>;

std::unique_ptr<RecordReader> open_file_record_reader(const std::string& path, DirectIo mode);
// The same with non-temporal buffered fills (for a host pool the device copies from).
std::unique_ptr<RecordReader> open_file_record_reader_for_dma(const std::string& path,
                                                              DirectIo mode);

}  // namespace cherenkov::engine
