// `cherenkov prepare [SOURCE] [--name ALIAS] [--experts 4,3,2] [--keep-source] [--hf-token T]
// [--output DIR]` (alias `pack`): resolves SOURCE through the model index (registering it when
// new), downloads an HF source when needed, packs into a managed store (or exports to --output,
// recorded in the index) and derives the selected Q3 / Q2 expert tables. Progress goes to stderr.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/index_flags.h"
#include "cli/progress_display.h"
#include "store/index/prepare_model.h"
#include "store/prepare.h"

namespace cherenkov::cli {
namespace {

struct PrepareArgs {
    IndexFlags flags;
    std::string source;
    std::string alias;
    std::string output;
    std::vector<std::string> experts;
    bool keep_source = false;
    bool json = false;
    unsigned threads = 0;
};

}  // namespace

Command register_prepare(CLI::App& parent) {
    auto args = std::make_shared<PrepareArgs>();
    CLI::App* app = parent.add_subcommand(
        "prepare", "Register, download if needed, and pack a checkpoint into an indexed store");
    app->alias("pack");
    app->add_option("source", args->source,
                    "Alias, ID, hf://owner/repo[@revision], disk://STORE/owner/repo[@commit] or "
                    "a path (default: the default checkpoint)");
    app->add_option("--name", args->alias, "Alias to select the model by");
    app->add_option("--output,-o", args->output,
                    "Export to this new directory (recorded in the index, never deleted by gc)");
    app->add_option("--experts", args->experts,
                    "Expert widths: 4, 3, 2 (commas, spaces or repeated)")
        ->allow_extra_args(false)
        ->take_all();
    app->add_flag("--keep-source", args->keep_source,
                  "Keep the downloaded weights after packing (reused by later prepares)");
    app->add_option("--threads", args->threads, "Quantization threads (default: all cores)");
    app->add_flag("--json", args->json, "Print the result as JSON");
    add_root_flag(*app, args->flags);
    add_token_flag(*app, args->flags);
    Command command;
    command.app = app;
    command.run = [args] {
        store::PrepareModelOptions prepare;
        prepare.source = args->source;
        prepare.alias = args->alias;
        prepare.output_dir = args->output;
        prepare.expert_bits = store::parse_expert_bits(args->experts);
        prepare.keep_source = args->keep_source;
        store::PrepareModelResult result;
        {
            ProgressDisplay display;
            store::IndexOptions options = index_options(args->flags, &display);
            options.n_threads = args->threads;
            result = store::prepare_model(prepare, options);
        }
        if (args->json) {
            std::cout << nlohmann::json{{"id", result.model_id},
                                        {"reference", result.reference},
                                        {"store", result.store_dir},
                                        {"base_packed", result.store.base_packed},
                                        {"derived", result.store.derived},
                                        {"reused", result.store.reused},
                                        {"repaired", result.store.repaired},
                                        {"published", result.store.published},
                                        {"exported", result.exported},
                                        {"downloaded", result.downloaded},
                                        {"downloaded_bytes", result.downloaded_bytes},
                                        {"source_retained", result.source_retained},
                                        {"source_removed", result.source_removed}}
                             .dump(2)
                      << '\n';
            return 0;
        }
        const bool changed = !result.store.derived.empty() || !result.store.repaired.empty();
        std::string summary = result.store.base_packed ? "packed "
                              : result.store.published ? "published "
                              : changed                ? "updated "
                                                       : "reused ";
        summary += result.store_dir;
        for (int width : result.store.derived)
            summary += ", derived " + store::lowbit_experts_name(width);
        for (int width : result.store.reused)
            summary += ", reused " + store::lowbit_experts_name(width);
        for (const std::string& name : result.store.repaired) summary += ", repaired " + name;
        std::printf("%s\n", summary.c_str());
        std::printf(
            "model %s ready%s%s\n", result.reference.c_str(),
            result.source_retained ? " (source retained)" : "",
            result.exported ? " (export recorded; the model keeps running from its store)" : "");
        return 0;
    };
    return command;
}

}  // namespace cherenkov::cli
