#include "cli/model_options.h"

namespace cherenkov::cli {

void add_model_options(CLI::App* app, ModelOptions& options) {
    app->add_option("model", options.model, "Packed store directory (cherenkov prepare makes one)")->required();
    app->add_option("--experts", options.experts, "Routed expert precision: 4, 3 or 2 bits (default 4)")
        ->check(CLI::IsMember({4, 3, 2}));
    app->add_option("--threads", options.threads, "CPU threads (default: every online CPU)")
        ->check(CLI::NonNegativeNumber);
}

std::unique_ptr<engine::LoadedModel> load_model(const ModelOptions& options) {
    engine::LoadOptions load;
    load.store_dir = options.model;
    load.expert_bits = options.experts;
    load.threads = options.threads;
    return engine::LoadedModel::load(load);
}

}  // namespace cherenkov::cli
