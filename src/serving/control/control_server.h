// The control socket's server (docs/monitoring.md "Control socket"): a Unix socket separate
// from HTTP, private to the user, answering one JSON request per connection on its own thread.
// It reads a request line of at most 64 KiB within two seconds, checks the peer's UID, answers
// from the handlers and closes. Handlers run on this thread and read copied statistics only.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "base/file_lock.h"
#include "base/unique_fd.h"
#include "serving/control/control_handlers.h"

namespace cherenkov::serving::control {

class ControlServer {
public:
    // Claims the path (control_socket_path.h: directory checks, lock, stale-socket cleanup),
    // binds with mode 0600 and starts answering. Throws Busy when another server owns the path,
    // InvalidInput for unsafe paths, Io when binding fails.
    ControlServer(std::string socket_path, ControlHandlers handlers);
    // Stops the thread, removes the socket and releases the lock.
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    const std::string& path() const { return path_; }

private:
    void run(const std::stop_token& stop);
    void serve_connection(int fd);

    std::string path_;
    ControlHandlers handlers_;
    FileLock lock_;
    UniqueFd listener_;
    UniqueFd wake_;  // eventfd: the destructor's stop signal for the poll loop
    std::jthread thread_;
};

}  // namespace cherenkov::serving::control
