#include "serving/control/peer_credentials.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "base/error.h"

namespace cherenkov::serving::control {

uid_t peer_uid(int fd) {
    ucred credentials{};
    socklen_t size = sizeof credentials;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) {
        throw_errno("cannot read the control peer's credentials", errno);
    }
    return credentials.uid;
}

void check_peer_uid(int fd, const std::string& what) {
    const uid_t uid = peer_uid(fd);
    if (uid != ::geteuid()) {
        throw_invalid(what + " runs as uid " + std::to_string(uid) + ", not as this user (uid " +
                      std::to_string(::geteuid()) + "); refusing it");
    }
}

}  // namespace cherenkov::serving::control
