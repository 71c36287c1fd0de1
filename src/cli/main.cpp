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
        cherenkov::cli::register_download(app),
    };
    for (auto& command : cherenkov::cli::register_model_commands(app)) commands.push_back(command);
    for (auto& command : cherenkov::cli::register_store_commands(app)) commands.push_back(command);

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
        return app.exit(e);
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
