#include "base/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>

#include "base/error.h"

namespace cherenkov {

UniqueFd open_read_only(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw_errno("cannot open " + path, errno);
    UniqueFd owned(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_errno("cannot stat " + path, errno);
    if (S_ISDIR(st.st_mode)) throw_invalid(path + ": is a directory, expected a file");
    return owned;
}

uint64_t file_size(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw_errno("cannot stat " + path, errno);
    return static_cast<uint64_t>(st.st_size);
}

void pread_exact(int fd, std::span<std::byte> out, uint64_t offset, const std::string& path) {
    size_t done = 0;
    while (done < out.size()) {
        ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
        if (n < 0) {
            if (errno == EINTR) continue;
            throw_errno("read failed: " + path + " at byte " + std::to_string(offset + done), errno);
        }
        if (n == 0) {
            throw_corrupt(path + ": file ends at byte " + std::to_string(offset + done) +
                          ", needed " + std::to_string(out.size()) + " bytes from byte " +
                          std::to_string(offset));
        }
        done += static_cast<size_t>(n);
    }
}

std::string read_text_file(const std::string& path) {
    UniqueFd fd = open_read_only(path);
    uint64_t size = file_size(fd.get(), path);
    std::string text(size, '\0');
    pread_exact(fd.get(), std::as_writable_bytes(std::span(text.data(), text.size())), 0, path);
    return text;
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::string& path, bool shared) {
    UniqueFd fd = open_read_only(path);
    uint64_t size = file_size(fd.get(), path);
    if (size == 0) return std::shared_ptr<const MappedFile>(new MappedFile(path, nullptr, 0));
    void* data = ::mmap(nullptr, size, PROT_READ, shared ? MAP_SHARED : MAP_PRIVATE, fd.get(), 0);
    if (data == MAP_FAILED) throw_errno("cannot map " + path, errno);
    // The mapping outlives the descriptor, so fd closes here.
    return std::shared_ptr<const MappedFile>(
        new MappedFile(path, static_cast<const std::byte*>(data), size));
}

MappedFile::~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace cherenkov
