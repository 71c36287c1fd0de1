// `cherenkov logits MODEL (--tokens 1,2,3 | --text STR) [--top N] [--full] --json`: one forward
// pass (in calls of at most --prefill-quantum tokens); JSON on stdout: {"tokens": [...], "top":
// [[[id, logit], ...] per position]} or, with
// --full, "logits": [[...] per position].
#include <algorithm>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/flag_range.h"
#include "cli/model_options.h"
#include "engine/model/prefill_quantum.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::cli {
namespace {

struct LogitsOptions {
    ModelOptions model;
    std::string tokens;
    std::string text;
    int top = 5;
    bool full = false;
    bool json = false;
};

std::vector<int32_t> parse_token_list(const std::string& list) {
    std::vector<int32_t> ids;
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
        size_t used = 0;
        long long value = 0;
        try {
            value = std::stoll(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || value < 0 || value > INT32_MAX) {
            throw_invalid("--tokens: '" + item + "' is not a token id");
        }
        ids.push_back(static_cast<int32_t>(value));
    }
    if (ids.empty()) throw_invalid("--tokens: empty list");
    return ids;
}

int run_logits(const LogitsOptions& options) {
    if (options.tokens.empty() == options.text.empty())
        throw_invalid("give exactly one of --tokens and --text");
    // The tokens come before the model loads: their count is the context it must hold.
    std::vector<int32_t> tokens;
    if (!options.tokens.empty()) tokens = parse_token_list(options.tokens);
    ModelOptions model_options = options.model;
    model_options.max_ctx_subject = [&options](int64_t n) {
        return std::string(options.tokens.empty() ? "--text" : "--tokens") + " (" +
               std::to_string(n) + " tokens)";
    };
    OpenedModel opened = load_model(
        model_options, [&](const std::string& store_dir, const model_data::qwen4_exp::Config&) {
            if (tokens.empty()) {
                tokens = text::Tokenizer::load_directory(store_dir).encode(options.text, true);
                if (tokens.empty()) throw_invalid("--text encodes to no tokens");
            }
            return static_cast<int64_t>(tokens.size());
        });
    engine::LoadedModel* loaded = opened.loaded.get();
    engine::SequenceState state = loaded->model().new_sequence(static_cast<int64_t>(tokens.size()));
    engine::ForwardOptions forward;
    forward.all_logits = true;
    // In prefill chunks like the generator's: the scratch is reserved for that many rows.
    engine::ForwardResult result = engine::forward_in_chunks(
        loaded->model(), state, tokens, forward, loaded->prefill_chunk_tokens());
    const int64_t vocab = loaded->model().vocab_size();

    nlohmann::json out;
    out["tokens"] = tokens;
    if (options.full) {
        nlohmann::json rows = nlohmann::json::array();
        for (int64_t t = 0; t < result.n_logit_rows; ++t) {
            rows.push_back(std::vector<float>(result.logits.begin() + t * vocab,
                                              result.logits.begin() + (t + 1) * vocab));
        }
        out["logits"] = rows;
    } else {
        const auto k = static_cast<size_t>(std::min<int64_t>(options.top, vocab));
        nlohmann::json top = nlohmann::json::array();
        std::vector<int32_t> order(static_cast<size_t>(vocab));
        for (int64_t t = 0; t < result.n_logit_rows; ++t) {
            const float* row = result.logits.data() + t * vocab;
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(
                order.begin(), order.begin() + static_cast<int64_t>(k), order.end(),
                [&](int32_t a, int32_t b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
            nlohmann::json entries = nlohmann::json::array();
            for (size_t i = 0; i < k; ++i) entries.push_back({order[i], row[order[i]]});
            top.push_back(entries);
        }
        out["top"] = top;
    }
    std::cout << out.dump() << '\n';
    return 0;
}

}  // namespace

Command register_logits(CLI::App& parent) {
    auto options = std::make_shared<LogitsOptions>();
    CLI::App* app =
        parent.add_subcommand("logits", "Run one forward pass and print logits as JSON");
    add_model_options(app, options->model);
    app->add_option("--tokens", options->tokens, "Comma-separated token ids");
    app->add_option("--text", options->text, "Text to tokenize (special tokens parsed)");
    app->add_option("--top", options->top, "Top entries per position (default 5)")
        ->check(at_least(1));
    app->add_flag("--full", options->full, "Every logit of every position");
    app->add_flag("--json", options->json, "JSON output (the only format)");
    return {app, [options]() { return run_logits(*options); }};
}

}  // namespace cherenkov::cli
