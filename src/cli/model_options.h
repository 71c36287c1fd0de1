// Flags shared by every command that runs the model (run, logits, perplexity, bench), and the
// one place that turns MODEL plus those flags into a LoadedModel.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>
#include <string>

#include "engine/experts/pool_setting.h"
#include "engine/model/prefill_quantum.h"
#include "engine/runtime/loaded_model.h"
#include "engine/tuning.h"
#include "model_data/qwen4_exp/config.h"
#include "store/index/resolve_model.h"

namespace cherenkov::cli {

struct ModelOptions {
    std::string model;  // any selector (docs/model-index.md) or a store directory
    int experts = 4;
    int miss_experts = 0;
    int threads = 0;
    std::string cpu_activations = "auto";  // --cpu-activations: auto, f32 or q8
    // --pool-gb and --host-pool-gb, parsed as the flags are read (engine/experts/pool_setting.h).
    engine::PoolSetting pool;
    std::string cache_policy = "lru";
    float cut_weak = 0.0F;
    int io_threads = 0;    // 0: half the online CPUs, 4 to 8
    std::string root;      // --root: the data root of the model index
    int64_t max_rows = 3;  // set by the command: rows per decode step (1 + drafts)
    std::string backend = "auto";
    bool check = false;
    // cuda: the host cache behind the device pool
    engine::PoolSetting host_pool = engine::PoolSetting::of(engine::PoolMode::Staging);
    std::string cpu_experts = "auto";  // --cpu-experts: off, auto or a share 0-1
    bool buffered_io = false;
    int64_t max_ctx = 4096;  // set by the command: the longest context it will run
    // set by the command: how messages name a context of N tokens (null: "--max-ctx N")
    std::function<std::string(int64_t)> max_ctx_subject;
    // --prefill-quantum: the most prompt tokens per forward call and the scratch kept for them
    // (default and why: engine/model/prefill_quantum.h), made as the flag is read.
    engine::PrefillQuantum prefill_quantum;
    bool build_missing_store = true;  // --no-build-missing-store clears it
    bool repack = false;              // --repack: rebuild the selected low-bit table at load
    int drafts = 2;                   // set by the command: 0 omits the MTP draft head
    engine::Tuning tuning;            // --tuning key=value (repeatable), parsed as read
};

// Adds the positional MODEL and the precision, pool, prefill, thread and index flags to `app`.
void add_model_options(CLI::App* app, ModelOptions& options);

// A resolved, loaded model. The lease on the store lives as long as this object.
// load_model() checks the flags that need no store before resolving MODEL.
struct OpenedModel {
    store::ResolvedModel resolved;
    std::unique_ptr<engine::LoadedModel> loaded;
    const std::string& store_dir() const { return resolved.store_dir; }
};

// What a command checks once MODEL resolves but before the model loads (seed: prompt, output
// and draft headroom against --max-ctx before loading), given the store and its parsed
// config.json. Returns the context the command will run: options.max_ctx, or a length it only
// learns from the store (the tokens of a text).
using BeforeLoad = std::function<int64_t(const std::string& store_dir,
                                         const model_data::qwen4_exp::Config& config)>;

// Resolves MODEL, runs `before_load`, checks that the context can be had
// (engine::check_context_capacity: the model's position limit and the memory of one sequence
// state), then loads the model with that context.
OpenedModel load_model(const ModelOptions& options, const BeforeLoad& before_load = {});

// The directory holding a model's tokenizer and template files: `model` itself when it holds
// one of them (tokenizer.json, tokenizer_config.json, vocab.json, chat_template.jinja), else the
// store any index selector resolves to.
std::string text_files_dir(const std::string& model);

}  // namespace cherenkov::cli
