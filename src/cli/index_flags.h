// Flags shared by the commands that use the model index: --root (after the subcommand) and,
// where the Hub may be contacted, --hf-token. Builds the IndexOptions once from them and the
// environment (XDG_*, HOME, HF_ENDPOINT, HF_TOKEN, HF_TOKEN_PATH, HF_HOME).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/progress_display.h"
#include "store/index/index_options.h"

namespace cherenkov::cli {

struct IndexFlags {
    std::string root;
    std::string hf_token;
};

inline void add_root_flag(CLI::App& app, IndexFlags& flags) {
    app.add_option("--root", flags.root,
                   "Data directory (scratch in DIR/scratch, config in DIR/cherenkov.toml)");
}

inline void add_token_flag(CLI::App& app, IndexFlags& flags) {
    app.add_option("--hf-token", flags.hf_token,
                   "Hugging Face token (default: HF_TOKEN, HF_TOKEN_PATH, $HF_HOME/token); "
                   "never stored");
}

inline store::IndexOptions index_options(const IndexFlags& flags, ProgressDisplay* display) {
    store::IndexOptions options = store::index_options_from_environment(flags.root, flags.hf_token);
    if (display != nullptr) options.events = display->callback();
    return options;
}

}  // namespace cherenkov::cli
