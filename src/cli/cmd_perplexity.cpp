// `cherenkov perplexity MODEL FILE [--ctx N] [--json]`: teacher-forced perplexity of a text file
// in consecutive windows of N tokens (each window a fresh sequence, run in calls of at most
// --prefill-quantum tokens; the first token of a window is context only).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/file.h"
#include "cli/commands.h"
#include "cli/flag_range.h"
#include "cli/model_options.h"
#include "engine/model/prefill_quantum.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::cli {
namespace {

struct PerplexityOptions {
    ModelOptions model;
    std::string file;
    int64_t ctx = 512;
    bool json = false;
};

int run_perplexity(const PerplexityOptions& options) {
    const std::string text = read_text_file(options.file);
    ModelOptions model_options = options.model;
    model_options.max_ctx = options.ctx;
    model_options.max_rows = 1;
    model_options.max_ctx_subject = [](int64_t n) { return "--ctx " + std::to_string(n); };
    OpenedModel opened = load_model(model_options);
    engine::LoadedModel* loaded = opened.loaded.get();
    const std::vector<int32_t> tokens =
        text::Tokenizer::load_directory(loaded->store_dir()).encode(text, false);
    if (tokens.size() < 2) throw_invalid(options.file + ": fewer than 2 tokens");
    const int64_t vocab = loaded->model().vocab_size();
    // Each window runs in prefill chunks: the scratch is reserved for that many rows.
    const int64_t chunk_rows = loaded->prefill_chunk_tokens();
    double nll = 0.0;
    int64_t scored = 0;
    int64_t windows = 0;
    for (size_t at = 0; at + 1 < tokens.size(); at += static_cast<size_t>(options.ctx)) {
        const size_t n = std::min(tokens.size() - at, static_cast<size_t>(options.ctx));
        if (n < 2) break;
        engine::SequenceState state = loaded->model().new_sequence(static_cast<int64_t>(n));
        engine::ForwardOptions forward;
        forward.all_logits = true;
        const auto window = std::span(tokens).subspan(at, n);
        engine::ForwardResult result =
            engine::forward_in_chunks(loaded->model(), state, window, forward, chunk_rows);
        for (size_t t = 0; t + 1 < n; ++t) {
            const float* row = result.logits.data() + static_cast<int64_t>(t) * vocab;
            float max = row[0];
            for (int64_t i = 1; i < vocab; ++i) max = std::max(max, row[i]);
            double sum = 0.0;
            for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i] - max));
            nll += std::log(sum) + max - row[window[t + 1]];
            ++scored;
        }
        ++windows;
    }
    const double ppl = std::exp(nll / static_cast<double>(scored));
    if (options.json) {
        nlohmann::json out = {{"file", options.file},    {"tokens", tokens.size()},
                              {"scored_tokens", scored}, {"windows", windows},
                              {"ctx", options.ctx},      {"mean_nll", nll / scored},
                              {"perplexity", ppl}};
        std::cout << out.dump() << '\n';
    } else {
        std::printf(
            "perplexity: %.4f (mean NLL %.4f nats over %lld tokens, %lld windows of up to %lld)\n",
            ppl, nll / static_cast<double>(scored), static_cast<long long>(scored),
            static_cast<long long>(windows), static_cast<long long>(options.ctx));
    }
    return 0;
}

}  // namespace

Command register_perplexity(CLI::App& parent) {
    auto options = std::make_shared<PerplexityOptions>();
    CLI::App* app = parent.add_subcommand("perplexity", "Teacher-forced perplexity of a text file");
    add_model_options(app, options->model);
    app->add_option("file", options->file, "Text file")->required();
    app->add_option("--ctx", options->ctx, "Tokens per window (default 512)")->check(at_least(2));
    app->add_flag("--json", options->json, "One JSON object on stdout");
    return {app, [options]() { return run_perplexity(*options); }};
}

}  // namespace cherenkov::cli
