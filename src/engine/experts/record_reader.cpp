#include "engine/experts/record_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

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

// The per-thread buffer of non-temporal fills: small enough to stay in the core's L2 between the
// pread that writes it and the copy that reads it.
constexpr size_t kBounceBytes = size_t{256} << 10;

// memcpy with non-temporal stores (a plain memcpy where there are none): the destination's lines
// go to memory without being left in the caches. The fence orders them before the caller
// publishes the read.
void copy_non_temporal(std::byte* dst, const std::byte* src, size_t n) {
#if defined(__x86_64__)
    size_t done = 0;
    const size_t misaligned = reinterpret_cast<uintptr_t>(dst) % 16;
    if (misaligned != 0) {
        done = std::min(n, 16 - misaligned);
        std::memcpy(dst, src, done);
    }
    for (; done + 64 <= n; done += 64) {
        const auto* from = reinterpret_cast<const __m128i*>(src + done);
        auto* to = reinterpret_cast<__m128i*>(dst + done);
        const __m128i a = _mm_loadu_si128(from);
        const __m128i b = _mm_loadu_si128(from + 1);
        const __m128i c = _mm_loadu_si128(from + 2);
        const __m128i d = _mm_loadu_si128(from + 3);
        _mm_stream_si128(to, a);
        _mm_stream_si128(to + 1, b);
        _mm_stream_si128(to + 2, c);
        _mm_stream_si128(to + 3, d);
    }
    for (; done + 16 <= n; done += 16) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + done),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + done)));
    }
    if (done < n) std::memcpy(dst + done, src + done, n - done);
    _mm_sfence();
#else
    std::memcpy(dst, src, n);
#endif
}

// pread_all through the per-thread buffer, copied out with non-temporal stores.
RecordRead pread_non_temporal(int fd, std::span<std::byte> out, uint64_t offset) {
    thread_local std::vector<std::byte> bounce(kBounceBytes);
    RecordRead result;
    while (result.n_bytes < out.size()) {
        const size_t want = std::min<size_t>(kBounceBytes, out.size() - result.n_bytes);
        const RecordRead piece =
            pread_all(fd, std::span(bounce.data(), want), offset + result.n_bytes);
        copy_non_temporal(out.data() + result.n_bytes, bounce.data(), piece.n_bytes);
        result.n_bytes += piece.n_bytes;
        if (piece.error_number != 0) {
            result.error_number = piece.error_number;
            return result;
        }
        if (piece.n_bytes < want) return result;  // the file ended
    }
    return result;
}

}  // namespace

FileRecordReader::FileRecordReader(const std::string& path, DirectIo mode, BufferedFill fill)
    : path_(path), buffered_fd_(open_read_only(path)), fill_(fill) {
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
    if (fill_ == BufferedFill::NonTemporal)
        return pread_non_temporal(buffered_fd_.get(), out, offset);
    return pread_all(buffered_fd_.get(), out, offset);
}

std::unique_ptr<RecordReader> open_file_record_reader(const std::string& path, DirectIo mode) {
    return std::make_unique<FileRecordReader>(path, mode);
}

std::unique_ptr<RecordReader> open_file_record_reader_for_dma(const std::string& path,
                                                              DirectIo mode) {
    return std::make_unique<FileRecordReader>(path, mode, BufferedFill::NonTemporal);
}

}  // namespace cherenkov::engine
