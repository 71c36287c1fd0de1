#include "serving/control/control_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/unique_fd.h"
#include "serving/control/control_protocol.h"
#include "serving/control/control_socket_path.h"
#include "serving/control/peer_credentials.h"

namespace cherenkov::serving::control {
namespace {

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left > 0 ? static_cast<int>(left) : 0;
}

// Waits for `events` on fd until the deadline; throws Io naming `what` on timeout.
void wait_for(int fd, short events, Clock::time_point deadline, const std::string& what) {
    for (;;) {
        pollfd entry{fd, events, 0};
        const int ready = ::poll(&entry, 1, remaining_ms(deadline));
        if (ready > 0) return;
        if (ready == 0) throw_io("timed out " + what);
        if (errno != EINTR) throw_errno(what, errno);
    }
}

}  // namespace

nlohmann::json control_request(const std::string& socket_path, const nlohmann::json& request,
                               std::chrono::milliseconds timeout) {
    check_control_socket_for_client(socket_path);
    const Clock::time_point deadline = Clock::now() + timeout;
    UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!fd.valid()) throw_errno("cannot create a socket", errno);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, socket_path.c_str(), socket_path.size());
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        if (errno == ECONNREFUSED || errno == ENOENT) {
            throw_not_found("no server is answering on " + socket_path +
                            " (a stale socket; start `cherenkov serve`, or pass --socket)");
        }
        if (errno != EINPROGRESS && errno != EAGAIN) {
            throw_errno("cannot connect to the control socket " + socket_path, errno);
        }
        wait_for(fd.get(), POLLOUT, deadline, "connecting to " + socket_path);
    }
    check_peer_uid(fd.get(), "the server on " + socket_path);

    const std::string frame = control_frame(request);
    if (frame.size() > kMaxFrameBytes) throw_invalid("control request is larger than 64 KiB");
    size_t sent = 0;
    while (sent < frame.size()) {
        const ssize_t n = ::send(fd.get(), frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
        } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            wait_for(fd.get(), POLLOUT, deadline, "sending to " + socket_path);
        } else {
            throw_errno("cannot send to the control socket " + socket_path, errno);
        }
    }

    std::string answer;
    char buffer[8192];
    for (;;) {
        wait_for(fd.get(), POLLIN, deadline, "waiting for the server on " + socket_path);
        const ssize_t n = ::recv(fd.get(), buffer, sizeof buffer, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            throw_errno("cannot read from the control socket " + socket_path, errno);
        }
        if (n == 0) break;
        answer.append(buffer, static_cast<size_t>(n));
        if (answer.size() > kMaxFrameBytes) {
            throw_io("the server on " + socket_path + " answered more than 64 KiB");
        }
        if (answer.back() == '\n') break;
    }
    if (answer.empty() || answer.back() != '\n') {
        throw_io("the server on " + socket_path + " closed the connection without an answer");
    }
    try {
        return nlohmann::json::parse(answer);
    } catch (const nlohmann::json::parse_error& e) {
        throw_io("the server on " + socket_path + " answered malformed JSON: " + e.what());
    }
}

}  // namespace cherenkov::serving::control
