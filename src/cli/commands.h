// Each command lives in cmd_<name>.cpp: its register function adds the subcommand and returns
// what to run once parsing (and global flags such as --log-level) are done. main.cpp is the
// only place that maps errors to exit codes (usage 2, everything else 1).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace cherenkov::cli {

struct Command {
    CLI::App* app = nullptr;
    // Returns the process exit code.
    std::function<int()> run;
};

Command register_inspect(CLI::App& parent);
Command register_prepare(CLI::App&);
Command register_tokenize(CLI::App& parent);
Command register_detokenize(CLI::App& parent);
Command register_prompt(CLI::App& parent);
Command register_run(CLI::App& parent);
Command register_logits(CLI::App& parent);
Command register_perplexity(CLI::App& parent);
Command register_bench(CLI::App& parent);
Command register_paths(CLI::App& parent);
Command register_download(CLI::App& parent);
Command register_serve(CLI::App& parent);
Command register_status(CLI::App& parent);
Command register_dash(CLI::App& parent);
// Commands with subcommands return one Command per leaf.
std::vector<Command> register_store_commands(CLI::App& parent);
std::vector<Command> register_model_commands(CLI::App& parent);
std::vector<Command> register_config_commands(CLI::App& parent);
std::vector<Command> register_stats_commands(CLI::App& parent);
// The seed's command names not built yet (cmd_reserved.cpp), skipping any registered before it:
// each says so and exits 1. Register it last.
std::vector<Command> register_reserved_commands(CLI::App& parent);

}  // namespace cherenkov::cli
