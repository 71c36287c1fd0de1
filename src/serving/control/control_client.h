// Client side of the control socket (docs/monitoring.md): one JSON request per connection,
// answered by one JSON line. Used by `cherenkov status|stats|config|dash`.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace cherenkov::serving::control {

// $TMPDIR/cherenkov-UID/control.sock (TMPDIR falling back to /tmp). Creates nothing: the
// server makes the directory; a client only connects.
std::string default_control_socket_path();

// Connects to `socket_path`, checks that the server runs as our effective UID (SO_PEERCRED),
// sends `request` as one line and returns the parsed answer. An answer of the form
// {"error": {...}} is returned as is: the caller decides how to report it.
// Throws cherenkov::Error: NotFound when nothing listens there ("no server is answering on
// PATH"), InvalidInput when the path or peer UID is unsafe, Io on timeouts and short or malformed
// answers. `timeout` bounds connecting, sending and the wait for the whole answer.
nlohmann::json control_request(const std::string& socket_path, const nlohmann::json& request,
                               std::chrono::milliseconds timeout);

}  // namespace cherenkov::serving::control
