// Where the control socket lives and the checks that keep it private (docs/monitoring.md
// "Control socket"): the socket's directory belongs to us with mode 0700, the socket has mode
// 0600, symlinks are refused, and a lock file next to the socket (held for the server's life)
// keeps a second server off the path and tells a live socket from a stale one.
#pragma once

#include <string>

#include "base/file_lock.h"

namespace cherenkov::serving::control {

// The lock a server holds for `socket_path`: "<socket_path>.lock".
std::string control_lock_path(const std::string& socket_path);

// Checks that `dir` is a real directory (not a symlink) owned by the effective UID with no
// group or other permissions. Throws InvalidInput naming the directory and what is wrong.
void check_private_directory(const std::string& dir);

// The server's side: creates the socket's directory (mode 0700) when absent (its parent must
// exist), checks it, takes the lock (Busy "another server owns ..." when held), and removes a
// stale socket left by a server that died. Refuses a symlink or non-socket at the path. Returns
// the held lock; the caller binds the socket while holding it.
FileLock claim_control_socket_path(const std::string& socket_path);

// The client's side: the directory is checked as above and the path must be a socket, not a
// symlink. Throws NotFound when nothing is there, InvalidInput when unsafe.
void check_control_socket_for_client(const std::string& socket_path);

// The socket path's directory ("." for a bare name).
std::string parent_directory(const std::string& path);

}  // namespace cherenkov::serving::control
