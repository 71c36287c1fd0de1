// The `cherenkov` executable: parses flags, runs one command, and is the only place that
// turns an error into an exit code (docs/style.md 2.4).
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/log.h"
#include "cli/commands.h"

namespace {

// "cherenkov: MESSAGE (see `cherenkov COMMAND --help`)", naming the deepest command the
// arguments reached, so the hint points at the help that lists the flag in question.
int report_usage_error(const CLI::App& app, const CLI::ParseError& e) {
    std::string command = "cherenkov";
    for (const CLI::App* at = &app; !at->get_subcommands().empty();) {
        at = at->get_subcommands().front();
        command += " " + at->get_name();
    }
    std::fprintf(stderr, "cherenkov: %s (see `%s --help`)\n", e.what(), command.c_str());
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Cherenkov: runs huge qwen4_exp MoE models from a 4-bit packed store"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "cherenkov 0.1.0");
    std::string log_level;
    app.add_option("--log-level", log_level,
                   "error, warn, info or debug (default: $CHERENKOV_LOG, else warn)");

    std::vector<cherenkov::cli::Command> commands = {
        cherenkov::cli::register_inspect(app),  cherenkov::cli::register_prepare(app),
        cherenkov::cli::register_tokenize(app), cherenkov::cli::register_detokenize(app),
        cherenkov::cli::register_prompt(app),   cherenkov::cli::register_run(app),
        cherenkov::cli::register_logits(app),   cherenkov::cli::register_perplexity(app),
        cherenkov::cli::register_bench(app),    cherenkov::cli::register_paths(app),
        cherenkov::cli::register_download(app), cherenkov::cli::register_serve(app),
        cherenkov::cli::register_status(app),   cherenkov::cli::register_dash(app),
    };
    for (auto& command : cherenkov::cli::register_stats_commands(app)) commands.push_back(command);
    for (auto& command : cherenkov::cli::register_model_commands(app)) commands.push_back(command);
    for (auto& command : cherenkov::cli::register_config_commands(app)) commands.push_back(command);
    for (auto& command : cherenkov::cli::register_store_commands(app)) commands.push_back(command);
    // Last: the seed's names no command above has taken yet.
    for (auto& command : cherenkov::cli::register_reserved_commands(app))
        commands.push_back(command);

    // `cherenkov MODEL 'prompt'` is `cherenkov run MODEL 'prompt'`: a first argument that is
    // neither a flag nor a command name selects the run command.
    std::vector<char*> args(argv, argv + argc);
    static char run_name[] = "run";
    if (argc > 1 && argv[1][0] != '-') {
        bool known = false;
        for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
            known = known || sub->check_name(argv[1]);
        }
        if (!known) args.insert(args.begin() + 1, run_name);
    }

    try {
        app.parse(static_cast<int>(args.size()), args.data());
    } catch (const CLI::ParseError& e) {
        // --help and --version print and exit 0; every other parse error is a usage error
        // (exit 2, commands.h), reported in the project's one-line form.
        if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
        return report_usage_error(app, e);
    }

    try {
        if (log_level.empty()) {
            const char* from_env = std::getenv("CHERENKOV_LOG");
            if (from_env != nullptr && *from_env != '\0') log_level = from_env;
        }
        if (!log_level.empty()) cherenkov::set_log_level(cherenkov::parse_log_level(log_level));
        for (const auto& command : commands) {
            if (command.app->parsed()) return command.run();
        }
    } catch (const cherenkov::Error& e) {
        std::fprintf(stderr, "cherenkov: %s\n", e.what());
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "cherenkov: internal error: %s\n", e.what());
        return 1;
    }
    return 1;
}
