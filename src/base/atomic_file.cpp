#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>

#include "base/error.h"
#include "base/unique_fd.h"

namespace cherenkov {

void sync_parent_directory(const std::string& path) {
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (parent.empty()) parent = ".";
    int fd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) throw_errno("cannot open directory " + parent.string(), errno);
    UniqueFd owned(fd);
    if (::fsync(fd) != 0) throw_errno("cannot sync directory " + parent.string(), errno);
}

void write_file_atomically(const std::string& path, std::string_view contents) {
    std::string temp = path + ".tmp-" + std::to_string(::getpid());
    int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw_errno("cannot create " + temp, errno);
    UniqueFd owned(fd);
    size_t done = 0;
    while (done < contents.size()) {
        ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int saved = errno;
            ::unlink(temp.c_str());
            throw_errno("cannot write " + temp, saved);
        }
        done += static_cast<size_t>(n);
    }
    if (::fsync(fd) != 0) {
        int saved = errno;
        ::unlink(temp.c_str());
        throw_errno("cannot sync " + temp, saved);
    }
    owned = UniqueFd();
    if (::rename(temp.c_str(), path.c_str()) != 0) {
        int saved = errno;
        ::unlink(temp.c_str());
        throw_errno("cannot publish " + path, saved);
    }
    sync_parent_directory(path);
}

}  // namespace cherenkov
