#include "cli/model_options.h"

namespace cherenkov::cli {

void add_model_options(CLI::App* app, ModelOptions& options) {
    app->add_option("model", options.model,
                    "Model: alias, ID, hf:// or disk:// URI, commit prefix, or a packed store directory")
        ->required();
    app->add_option("--root", options.root, "Data root of the model index (default: XDG paths)");
    app->add_option("--experts", options.experts, "Routed expert precision: 4, 3 or 2 bits (default 4)")
        ->check(CLI::IsMember({4, 3, 2}));
    app->add_option("--threads", options.threads, "CPU threads (default: every online CPU)")
        ->check(CLI::NonNegativeNumber);
}

OpenedModel load_model(const ModelOptions& options) {
    OpenedModel opened;
    opened.resolved = store::resolve_model(options.model, store::index_options_from_environment(options.root, ""));
    engine::LoadOptions load;
    load.store_dir = opened.resolved.store_dir;
    load.expert_bits = options.experts;
    load.threads = options.threads;
    opened.loaded = engine::LoadedModel::load(load);
    return opened;
}

}  // namespace cherenkov::cli
