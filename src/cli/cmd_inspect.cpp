// `cherenkov inspect PATH [--json]`: describes a checkpoint directory, a remote checkpoint
// (http(s) base URL), a safetensors file or a GGUF file. The report goes to stdout.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "model_data/inspect/inspect_target.h"

namespace cherenkov::cli {

Command register_inspect(CLI::App& parent) {
    struct Options {
        std::string target;
        bool json = false;
        std::string hf_token;
    };
    auto options = std::make_shared<Options>();
    CLI::App* app = parent.add_subcommand(
        "inspect", "Describe a checkpoint, safetensors or GGUF file: tensors, encodings, byte ranges, roles and "
                   "what preparation needs");
    app->add_option("path", options->target, "Checkpoint directory, http(s) checkpoint URL, .safetensors or .gguf file")
        ->required();
    app->add_flag("--json", options->json, "Print the complete machine-readable report");
    app->add_option("--hf-token", options->hf_token, "Bearer token for remote checkpoints (default: $HF_TOKEN)");

    auto run = [options]() {
        model_data::HttpOptions http;
        http.bearer_token = options->hf_token;
        if (http.bearer_token.empty()) {
            const char* token = std::getenv("HF_TOKEN");
            if (token != nullptr) http.bearer_token = token;
        }
        model_data::inspect::InspectOutput output = model_data::inspect::inspect_target(options->target, http);
        if (options->json) {
            std::cout << output.report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        } else {
            std::cout << output.text;
        }
        std::cout.flush();
        return 0;
    };
    return Command{app, run};
}

}  // namespace cherenkov::cli
