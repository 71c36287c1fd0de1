// `cherenkov config show|reload [--socket PATH] [--json]`: the running server's settings and
// their reload (docs/configuration.md), asked over its control socket; nothing is loaded here.
// show prints the settings as TOML with where each came from; reload rereads the server's
// startup file and applies a change of [defaults] only, exiting 1 when the server refuses it.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "cli/commands.h"
#include "serving/config/settings_report.h"
#include "serving/control/control_client.h"

namespace cherenkov::cli {
namespace {

struct ConfigArgs {
    std::string socket;
    bool json = false;
};

constexpr std::chrono::seconds kTimeout{5};

// The server's answer to `op`; an error answer throws with the server's message.
nlohmann::json ask(const ConfigArgs& args, const std::string& op) {
    const std::string path =
        args.socket.empty() ? serving::control::default_control_socket_path() : args.socket;
    nlohmann::json answer = serving::control::control_request(path, {{"op", op}}, kTimeout);
    // A refused reload is an answer ({"ok": false, "error": "why"}); the protocol's errors are
    // objects.
    if (answer.contains("error") && answer["error"].is_object()) {
        const nlohmann::json& error = answer["error"];
        const std::string code = error.value("code", "failed");
        const std::string message = error.value("message", error.dump());
        if (code == "not_ready") throw Error(ErrorKind::Busy, path + ": " + message);
        throw Error(ErrorKind::Io, path + ": " + op + " failed (" + code + "): " + message);
    }
    return answer;
}

int show(const ConfigArgs& args) {
    const nlohmann::json answer = ask(args, "config_show");
    if (args.json) {
        std::printf("%s\n", answer.dump(2).c_str());
        return 0;
    }
    const nlohmann::json& file = answer["file"];
    std::printf(
        "# the running server's settings (configuration file: %s; generation %s)\n"
        "# after each value: where it came from (default, file or flag) and its flag\n\n%s",
        file.is_string() ? file.get<std::string>().c_str() : "none",
        answer.value("generation", nlohmann::json(0)).dump().c_str(),
        serving::config::settings_toml(answer).c_str());
    return 0;
}

int reload(const ConfigArgs& args) {
    const nlohmann::json answer = ask(args, "config_reload");
    const bool ok = answer.value("ok", false);
    if (args.json) {
        std::printf("%s\n", answer.dump(2).c_str());
        return ok ? 0 : 1;
    }
    if (!ok) {
        std::fprintf(stderr, "cherenkov: reload refused: %s\n",
                     answer.value("error", std::string("no reason given")).c_str());
        return 1;
    }
    std::string changed;
    for (const nlohmann::json& key : answer.value("changed", nlohmann::json::array())) {
        changed += (changed.empty() ? "" : ", ") + key.get<std::string>();
    }
    std::printf("reloaded: generation %s; %s\n",
                answer.value("generation", nlohmann::json(0)).dump().c_str(),
                changed.empty() ? "nothing changed" : ("changed " + changed).c_str());
    return 0;
}

}  // namespace

std::vector<Command> register_config_commands(CLI::App& parent) {
    CLI::App* config = parent.add_subcommand(
        "config", "Show or reload the running server's settings, over its control socket");
    config->require_subcommand(1);
    std::vector<Command> commands;
    const auto add = [&](const char* name, const char* help, int (*run)(const ConfigArgs&)) {
        auto args = std::make_shared<ConfigArgs>();
        CLI::App* app = config->add_subcommand(name, help);
        app->add_option("--socket", args->socket,
                        "The server's control socket (default $TMPDIR/cherenkov-UID/control.sock)");
        app->add_flag("--json", args->json, "Print the server's answer as JSON");
        commands.push_back({app, [args, run]() { return run(*args); }});
    };
    add("show", "Print the settings the server runs with and where each came from", show);
    add("reload",
        "Reread the server's configuration file and apply its [defaults] and "
        "[defaults.sampling] (any other change is refused)",
        reload);
    return commands;
}

}  // namespace cherenkov::cli
