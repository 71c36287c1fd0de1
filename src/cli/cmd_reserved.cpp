// The seed's command names that are not built yet. Each is a real subcommand, so the default
// `cherenkov MODEL 'prompt'` rule never takes it for a model and `cherenkov stats --help` does not
// print run's help: it says plainly that the command is not built and which issue brings it, and
// exits 1 (an unavailable feature, not a usage error), whatever arguments follow.
#include <array>
#include <string>

#include "base/error.h"
#include "cli/commands.h"

namespace cherenkov::cli {
namespace {

struct ReservedCommand {
    const char* name;
    const char* issue;  // the issue that builds it, as "issue N: topic"
};

// When a command lands, delete its line: a name registered elsewhere is skipped anyway, so the
// line can also go later without breaking the build.
// None left: every seed command is built.
constexpr std::array<ReservedCommand, 0> kReserved = {};

}  // namespace

std::vector<Command> register_reserved_commands(CLI::App& parent) {
    std::vector<Command> commands;
    for (const ReservedCommand& reserved : kReserved) {
        bool taken = false;
        for (const CLI::App* sub : parent.get_subcommands([](const CLI::App*) { return true; })) {
            taken = taken || sub->check_name(reserved.name);
        }
        if (taken) continue;
        CLI::App* app = parent.add_subcommand(
            reserved.name, std::string("Not built yet (") + reserved.issue + ")");
        // Every argument, --help included, reaches the message below.
        app->set_help_flag();
        app->allow_extras();
        const std::string message =
            std::string("`") + reserved.name + "` is not built yet (" + reserved.issue + ")";
        commands.push_back({app, [message]() -> int { throw_unsupported(message); }});
    }
    return commands;
}

}  // namespace cherenkov::cli
