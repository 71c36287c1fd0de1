// `cherenkov status [--json] [--socket PATH]`: what the resident server is doing, asked over its
// control socket (docs/monitoring.md); it loads no model. Text is Markdown when redirected.
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "cli/monitor_text.h"

namespace cherenkov::cli {
namespace {

struct StatusOptions {
    std::string socket;
    bool json = false;
};

std::string status_text(const nlohmann::json& status, const TextStyle& style) {
    std::string out = style.heading("cherenkov status");
    const bool ready = status.value("ready", false);
    out += style.item("state", ready ? "ready" : "loading");
    out += style.item("model", value_text(status.value("model", nlohmann::json())));
    out += style.item("url", value_text(status.value("url", nlohmann::json())));
    out += style.item("socket", value_text(status.value("socket", nlohmann::json())));
    out += style.item("pid", value_text(status.value("pid", nlohmann::json())));
    if (status.contains("backend"))
        out += style.item("backend", value_text(field(status, "backend")));
    if (status.contains("uptime_seconds"))
        out += style.item("uptime", value_text(field(status, "uptime_seconds")) + " s");
    if (status.contains("memory")) {
        const nlohmann::json& memory = field(status, "memory");
        out += style.item("rss", bytes_text(memory.value("rss_bytes", uint64_t{0})));
    }
    if (!status.contains("requests")) return out;
    const nlohmann::json& requests = field(status, "requests");
    out += "\n" + style.heading("Requests", 2);
    out += style.item("running", value_text(field(requests, "active")) + ", queued " +
                                     value_text(field(requests, "queued")));
    out += style.item("finished", value_text(field(requests, "completed")) + " completed, " +
                                      value_text(field(requests, "cancelled")) + " cancelled, " +
                                      value_text(field(requests, "failed")) + " failed, " +
                                      value_text(field(requests, "rejected")) + " rejected");
    out += style.item("tokens", value_text(field(requests, "prompt_tokens")) + " prompt (" +
                                    value_text(field(requests, "cached_prompt_tokens")) +
                                    " cached), " + value_text(field(requests, "generated_tokens")) +
                                    " generated");
    out += style.item("reserved state", bytes_text(requests.value("reserved_bytes", uint64_t{0})));
    out += style.item("current", value_text(field(requests, "current")));
    if (!field(requests, "running").empty()) {
        std::vector<std::vector<std::string>> rows;
        for (const nlohmann::json& r : field(requests, "running")) {
            rows.push_back({value_text(field(r, "id")), value_text(field(r, "phase")),
                            value_text(field(r, "prompt_tokens")),
                            value_text(field(r, "prompt_done")),
                            value_text(field(r, "generated_tokens")),
                            value_text(field(r, "running_seconds"))});
        }
        out +=
            "\n" +
            style.table({"request", "phase", "prompt", "prefilled", "generated", "seconds"}, rows);
    }
    const nlohmann::json& cache = field(status, "cache");
    const nlohmann::json& sessions = field(status, "sessions");
    out += "\n" + style.heading("Caches", 2);
    out += style.item("prefix cache", value_text(field(cache, "entries")) + " entries, " +
                                          bytes_text(cache.value("bytes", uint64_t{0})) + ", " +
                                          value_text(field(cache, "hits")) + " hits, " +
                                          value_text(field(cache, "misses")) + " misses");
    out += style.item("sessions", value_text(field(sessions, "sessions")) + " (" +
                                      value_text(field(sessions, "busy")) + " busy), " +
                                      bytes_text(sessions.value("bytes", uint64_t{0})));
    return out;
}

}  // namespace

Command register_status(CLI::App& parent) {
    auto options = std::make_shared<StatusOptions>();
    CLI::App* app = parent.add_subcommand(
        "status", "Show what the running server is doing, over its control socket");
    app->add_flag("--json", options->json, "Print the complete status object as JSON");
    app->add_option("--socket", options->socket,
                    "The server's control socket (default $TMPDIR/cherenkov-UID/control.sock)");
    return {app, [options]() {
                const nlohmann::json status =
                    control_call(socket_or_default(options->socket), {{"op", "status"}});
                if (options->json) {
                    std::cout << status.dump(2) << '\n';
                } else {
                    std::cout << status_text(status, TextStyle::for_stdout());
                }
                return 0;
            }};
}

}  // namespace cherenkov::cli
