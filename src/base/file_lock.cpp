#include "base/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>

#include <cerrno>

#include "base/error.h"

namespace cherenkov {
namespace {

UniqueFd open_lock_file(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw_errno("cannot open lock file " + path, errno);
    return UniqueFd(fd);
}

// Returns false when `non_blocking` and another holder conflicts.
bool lock_fd(int fd, LockMode mode, bool non_blocking, const std::string& path) {
    int operation = mode == LockMode::Shared ? LOCK_SH : LOCK_EX;
    if (non_blocking) operation |= LOCK_NB;
    while (::flock(fd, operation) != 0) {
        if (errno == EINTR) continue;
        if (errno == EWOULDBLOCK) return false;
        throw_errno("cannot lock " + path, errno);
    }
    return true;
}

}  // namespace

FileLock FileLock::acquire(const std::string& path, LockMode mode) {
    UniqueFd fd = open_lock_file(path);
    lock_fd(fd.get(), mode, false, path);
    return FileLock(path, std::move(fd));
}

std::optional<FileLock> FileLock::try_acquire(const std::string& path, LockMode mode) {
    UniqueFd fd = open_lock_file(path);
    if (!lock_fd(fd.get(), mode, true, path)) return std::nullopt;
    return FileLock(path, std::move(fd));
}

}  // namespace cherenkov
