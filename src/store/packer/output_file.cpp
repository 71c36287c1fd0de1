#include "store/packer/output_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"

namespace cherenkov::store {

OutputFile::OutputFile(std::string path, uint64_t size_bytes, OutputMode mode)
    : path_(std::move(path)), size_bytes_(size_bytes) {
    int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw_errno("cannot create " + path_, errno);
    fd_ = UniqueFd(fd);
    if (::ftruncate(fd, static_cast<off_t>(size_bytes)) != 0)
        throw_errno("cannot size " + path_, errno);
    if (mode == OutputMode::DirectWhenAligned) {
        // EINVAL where the file system has no O_DIRECT: then every write is buffered.
        const int direct = ::open(path_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
        if (direct >= 0) direct_fd_ = UniqueFd(direct);
    }
}

void OutputFile::write_at(uint64_t offset, std::span<const std::byte> bytes) {
    if (offset + bytes.size() > size_bytes_) {
        throw_internal(path_ + ": write at " + std::to_string(offset) + " past the planned size");
    }
    const bool aligned = offset % kDirectAlign == 0 && bytes.size() % kDirectAlign == 0 &&
                         reinterpret_cast<uintptr_t>(bytes.data()) % kDirectAlign == 0;
    const int fd = direct_fd_.valid() && aligned ? direct_fd_.get() : fd_.get();
    size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::pwrite(fd, bytes.data() + done, bytes.size() - done,
                             static_cast<off_t>(offset + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw_errno("cannot write " + path_, errno);
        done += static_cast<size_t>(n);
    }
}

void OutputFile::finish() {
    if (!fd_.valid()) return;
    direct_fd_ = UniqueFd();
    if (::fsync(fd_.get()) != 0) throw_errno("cannot sync " + path_, errno);
    int fd = fd_.release();
    if (::close(fd) != 0) throw_errno("cannot close " + path_, errno);
}

}  // namespace cherenkov::store
