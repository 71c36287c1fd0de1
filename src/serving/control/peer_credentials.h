// The effective UID of the process at the other end of a connected Unix socket (SO_PEERCRED,
// Linux's getpeereid). Both sides of the control socket refuse a peer of another user.
#pragma once

#include <sys/types.h>

#include <string>

namespace cherenkov::serving::control {

// Throws Io when the kernel cannot say.
uid_t peer_uid(int fd);

// Throws InvalidInput naming `what` when the peer's UID is not our effective UID.
void check_peer_uid(int fd, const std::string& what);

}  // namespace cherenkov::serving::control
