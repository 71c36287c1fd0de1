#include "serving/control/control_socket_path.h"

#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "base/error.h"
#include "serving/control/control_client.h"

namespace cherenkov::serving::control {
namespace {

std::string octal_mode(mode_t mode) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
    return buf;
}

void check_length(const std::string& socket_path) {
    if (socket_path.empty()) throw_invalid("--socket: the control socket path is empty");
    if (socket_path.size() >= sizeof(sockaddr_un::sun_path)) {
        throw_invalid("--socket: control socket path " + socket_path + " is longer than " +
                      std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes");
    }
}

}  // namespace

std::string default_control_socket_path() {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string base = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    return base + "/cherenkov-" + std::to_string(::geteuid()) + "/control.sock";
}

std::string control_lock_path(const std::string& socket_path) {
    return socket_path + ".lock";
}

std::string parent_directory(const std::string& path) {
    const size_t slash = path.find_last_of('/');
    if (slash == std::string::npos) return ".";
    if (slash == 0) return "/";
    return path.substr(0, slash);
}

void check_private_directory(const std::string& dir) {
    struct stat info {};
    if (::lstat(dir.c_str(), &info) != 0) throw_errno("control socket directory " + dir, errno);
    if (S_ISLNK(info.st_mode)) {
        throw_invalid("control socket directory " + dir + " is a symlink; refusing it");
    }
    if (!S_ISDIR(info.st_mode))
        throw_invalid("control socket directory " + dir + " is not a directory");
    if (info.st_uid != ::geteuid()) {
        throw_invalid("control socket directory " + dir + " is owned by uid " +
                      std::to_string(info.st_uid) + ", not by this user (uid " +
                      std::to_string(::geteuid()) + ")");
    }
    if ((info.st_mode & 077) != 0) {
        throw_invalid("control socket directory " + dir + " has unsafe permissions " +
                      octal_mode(info.st_mode) + " (must be 0700)");
    }
}

FileLock claim_control_socket_path(const std::string& socket_path) {
    check_length(socket_path);
    const std::string dir = parent_directory(socket_path);
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        throw_errno(
            "cannot create the control socket directory " + dir + " (its parent must exist)",
            errno);
    }
    check_private_directory(dir);
    const std::string lock_path = control_lock_path(socket_path);
    struct stat lock_info {};
    if (::lstat(lock_path.c_str(), &lock_info) == 0 && !S_ISREG(lock_info.st_mode)) {
        throw_invalid("control socket lock " + lock_path + " is not a regular file; refusing it");
    }
    std::optional<FileLock> lock = FileLock::try_acquire(lock_path, LockMode::Exclusive);
    if (!lock) {
        throw Error(ErrorKind::Busy, "another server owns the control socket " + socket_path +
                                         " (its lock " + lock_path + " is held)");
    }
    struct stat info {};
    if (::lstat(socket_path.c_str(), &info) == 0) {
        if (!S_ISSOCK(info.st_mode)) {
            throw_invalid("control socket path " + socket_path +
                          " exists and is not a socket; refusing to replace it");
        }
        // We hold the lock, so no live server owns this socket: a dead one left it.
        if (::unlink(socket_path.c_str()) != 0) {
            throw_errno("cannot remove the stale control socket " + socket_path, errno);
        }
    } else if (errno != ENOENT) {
        throw_errno("control socket " + socket_path, errno);
    }
    return std::move(*lock);
}

void check_control_socket_for_client(const std::string& socket_path) {
    check_length(socket_path);
    struct stat info {};
    if (::lstat(socket_path.c_str(), &info) != 0) {
        if (errno == ENOENT || errno == ENOTDIR) {
            throw_not_found("no server is answering on " + socket_path +
                            " (no socket there; start `cherenkov serve`, or pass --socket)");
        }
        throw_errno("control socket " + socket_path, errno);
    }
    if (S_ISLNK(info.st_mode))
        throw_invalid("control socket " + socket_path + " is a symlink; refusing it");
    if (!S_ISSOCK(info.st_mode))
        throw_invalid("control socket " + socket_path + " is not a socket");
    check_private_directory(parent_directory(socket_path));
}

}  // namespace cherenkov::serving::control
