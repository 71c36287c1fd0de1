#include "serving/control/control_server.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <variant>

#include "base/error.h"
#include "base/log.h"
#include "serving/control/control_protocol.h"
#include "serving/control/control_socket_path.h"
#include "serving/control/peer_credentials.h"

namespace cherenkov::serving::control {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::chrono::seconds kInputDeadline{2};

void send_all(int fd, const std::string& frame) {
    size_t sent = 0;
    const Clock::time_point deadline = Clock::now() + kInputDeadline;
    while (sent < frame.size() && Clock::now() < deadline) {
        const ssize_t n = ::send(fd, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            pollfd entry{fd, POLLOUT, 0};
            ::poll(&entry, 1, 100);
            continue;
        }
        return;  // the client went away; nothing to tell it
    }
}

// Reads one line within the deadline. Returns the line, or an error answer to send instead.
std::variant<std::string, nlohmann::json> read_request_line(int fd) {
    std::string line;
    const Clock::time_point deadline = Clock::now() + kInputDeadline;
    char buffer[4096];
    for (;;) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) return control_error("timeout", "no complete request line within 2 seconds");
        pollfd entry{fd, POLLIN, 0};
        const int ready = ::poll(&entry, 1, static_cast<int>(left));
        if (ready < 0 && errno != EINTR) return control_error("io", std::strerror(errno));
        if (ready <= 0) continue;
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            return control_error("io", std::strerror(errno));
        }
        if (n == 0) {
            return control_error("invalid_request", "the request ended without a newline");
        }
        line.append(buffer, static_cast<size_t>(n));
        const size_t newline = line.find('\n');
        if (newline != std::string::npos) {
            if (newline + 1 > kMaxFrameBytes) break;
            line.resize(newline);
            return line;
        }
        if (line.size() >= kMaxFrameBytes) break;
    }
    return control_error("too_large", "the request line is longer than 64 KiB");
}

}  // namespace

ControlServer::ControlServer(std::string socket_path, ControlHandlers handlers)
    : path_(std::move(socket_path)), handlers_(std::move(handlers)) {
    lock_ = claim_control_socket_path(path_);
    listener_ = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!listener_.valid()) throw_errno("cannot create the control socket", errno);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path_.c_str(), path_.size());
    // The socket is created 0600: the umask covers the window between bind and chmod.
    const mode_t old_mask = ::umask(0177);
    const int bound =
        ::bind(listener_.get(), reinterpret_cast<const sockaddr*>(&address), sizeof address);
    const int bind_errno = errno;
    ::umask(old_mask);
    if (bound != 0) throw_errno("cannot bind the control socket " + path_, bind_errno);
    if (::chmod(path_.c_str(), 0600) != 0) throw_errno("cannot chmod " + path_, errno);
    if (::listen(listener_.get(), 16) != 0) throw_errno("cannot listen on " + path_, errno);
    wake_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!wake_.valid()) throw_errno("cannot create an eventfd", errno);
    thread_ = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

ControlServer::~ControlServer() {
    thread_.request_stop();
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(wake_.get(), &one, sizeof one);
    if (thread_.joinable()) thread_.join();
    // Removed while the lock is still held, so no other server's fresh socket is taken away.
    ::unlink(path_.c_str());
}

void ControlServer::run(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
        pollfd entries[2] = {{listener_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
        const int ready = ::poll(entries, 2, 1000);
        if (ready <= 0 || (entries[0].revents & POLLIN) == 0) continue;
        UniqueFd connection(
            ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
        if (!connection.valid()) continue;
        try {
            serve_connection(connection.get());
        } catch (const std::exception& e) {
            // One bad connection never stops the control thread (docs/style.md 2.4).
            log_warn("control", std::string("connection failed: ") + e.what());
        }
    }
}

void ControlServer::serve_connection(int fd) {
    try {
        check_peer_uid(fd, "the control client");
    } catch (const Error& e) {
        log_warn("control", e.what());
        send_all(fd, control_frame(control_error("forbidden", e.what())));
        return;
    }
    auto line = read_request_line(fd);
    if (auto* error = std::get_if<nlohmann::json>(&line)) {
        send_all(fd, control_frame(*error));
        return;
    }
    nlohmann::json answer;
    try {
        const ControlRequest request = parse_control_request(std::get<std::string>(line));
        answer = dispatch_control_request(handlers_, request);
    } catch (const Error& e) {
        answer = control_error("invalid_request", e.what());
    }
    std::string frame = control_frame(answer);
    if (frame.size() > kMaxFrameBytes) {
        frame = control_frame(control_error("too_large", "the answer is larger than 64 KiB"));
    }
    send_all(fd, frame);
}

}  // namespace cherenkov::serving::control
