// Flags shared by every command that runs the model (run, logits, perplexity, bench), and the
// one place that turns MODEL plus those flags into a LoadedModel.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/runtime/loaded_model.h"

namespace cherenkov::cli {

struct ModelOptions {
    std::string model;  // a store directory
    int experts = 4;
    int threads = 0;
};

// Adds the positional MODEL and --experts / --threads to `app`.
void add_model_options(CLI::App* app, ModelOptions& options);

std::unique_ptr<engine::LoadedModel> load_model(const ModelOptions& options);

}  // namespace cherenkov::cli
