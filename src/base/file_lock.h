// Advisory whole-file locks with flock(2): shared or exclusive, blocking or not. The kernel drops
// a lock when its holder dies, so a crashed process never leaves a lock behind. Lock files are
// never deleted, so every process agrees on the lock's identity (the inode).
#pragma once

#include <optional>
#include <string>

#include "base/unique_fd.h"

namespace cherenkov {

enum class LockMode { Shared, Exclusive };

// Holds one flock on one open file description; move-only, released by the destructor.
// Locks taken through different FileLock objects conflict even inside one process.
class FileLock {
public:
    FileLock() = default;

    // Opens (creating when absent) and locks `path`, waiting while another holder conflicts.
    static FileLock acquire(const std::string& path, LockMode mode);
    // As acquire, but returns nullopt at once when another holder conflicts.
    [[nodiscard]] static std::optional<FileLock> try_acquire(const std::string& path,
                                                             LockMode mode);

    bool held() const { return fd_.valid(); }
    const std::string& path() const { return path_; }
    void release() { fd_ = UniqueFd(); }

private:
    FileLock(std::string path, UniqueFd fd) : path_(std::move(path)), fd_(std::move(fd)) {}

    std::string path_;
    UniqueFd fd_;
};

}  // namespace cherenkov
