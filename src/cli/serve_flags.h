// The flags of `cherenkov serve` and the configuration values they stand for. The flags bind to
// ServeArgs; after parsing, explicit_flag_values() turns the ones given on the command line
// (given at all: CLI11's count(), so a flag equal to its default still overrides the file) into
// values for serving/config's resolver, which puts them over the configuration file.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/model_options.h"
#include "serving/config/resolved_config.h"

namespace cherenkov::cli {

struct ServeArgs {
    ModelOptions model;  // MODEL and the engine flags (add_model_options)
    std::string host;
    int port = 0;
    int64_t max_ctx = 0;
    int drafts = 0;
    bool no_eos = false;
    int max_active = 0;
    int max_queued = 0;
    double prefill_chunk_seconds = 0;
    std::string state_memory_gb;
    int64_t prefix_cache_mb = 0;
    int64_t prefix_cache_entries = 0;
    double prefix_cache_idle_seconds = 0;
    int64_t prefix_cache_interval = 0;
    int64_t max_sessions = 0;
    int64_t session_memory_mb = 0;
    double session_idle_seconds = 0;
    std::string socket;
    // Not settings: what to read and whether to only print.
    std::string config;  // --config FILE
    bool print_config = false;
};

// Adds every `serve` flag to `app`, bound to `args`. Help texts give the built-in defaults
// (serving/config/serve_config.h); a flag's value is only used when it is given.
void add_serve_flags(CLI::App* app, ServeArgs& args);

// The settings the command line gave explicitly, in catalogue order; the positional MODEL
// replaces both server.model and server.model_dir.
std::vector<serving::config::FlagValue> explicit_flag_values(const CLI::App& app,
                                                             const ServeArgs& args);

// Flags that are no setting (actions and diagnostics of this one start), so they have no key.
inline constexpr const char* kCommandOnlyServeFlags[] = {"--config", "--print-config", "--check",
                                                         "--repack", "--help"};

}  // namespace cherenkov::cli
