// `cherenkov inspect REF [--json]`: REF is any model selector (an indexed model is described by
// its prepared store when recorded, else by the description saved at registration), a
// checkpoint directory, a remote checkpoint (http(s) base URL), a safetensors or GGUF file.
// The report goes to stdout; progress of remote reads to stderr.
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/index_flags.h"
#include "cli/progress_display.h"
#include "store/index/model_listing.h"

namespace cherenkov::cli {

Command register_inspect(CLI::App& parent) {
    struct Options {
        IndexFlags flags;
        std::string target;
        bool json = false;
    };
    auto options = std::make_shared<Options>();
    CLI::App* app = parent.add_subcommand(
        "inspect",
        "Describe a model, checkpoint, safetensors or GGUF file: tensors, encodings, byte "
        "ranges, roles and what preparation needs");
    app->add_option("model", options->target,
                    "Alias, ID, hf:// or disk:// URI, checkpoint directory, http(s) checkpoint "
                    "URL, .safetensors or .gguf file")
        ->required();
    app->add_flag("--json", options->json, "Print the complete machine-readable report");
    add_root_flag(*app, options->flags);
    add_token_flag(*app, options->flags);

    auto run = [options]() {
        model_data::inspect::InspectOutput output;
        {
            ProgressDisplay display;
            output = store::inspect_model(options->target, index_options(options->flags, &display));
        }
        if (options->json) {
            std::cout << output.report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                      << '\n';
        } else {
            std::cout << output.text;
        }
        std::cout.flush();
        return 0;
    };
    return Command{app, run};
}

}  // namespace cherenkov::cli
