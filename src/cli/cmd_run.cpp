// `cherenkov [run] MODEL 'prompt' [...]`: generate text from a packed store. The prompt goes
// through the store's chat template unless --raw; text streams to stdout; load, prefill and
// decode timings, MTP acceptance and a memory_stats JSON line go to stderr.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/flag_range.h"
#include "cli/model_options.h"
#include "engine/generate/context_budget.h"
#include "engine/generate/generator.h"
#include "engine/generate/sampler.h"
#include "text/chat_message.h"
#include "text/chat_template.h"
#include "text/tokenizer/streaming_detokenizer.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::cli {
namespace {

struct RunOptions {
    ModelOptions model;
    std::string prompt;
    int64_t max_tokens = 256;
    int drafts = 2;
    engine::SamplingOptions sampling;
    bool no_eos = false;
    int repeat = 1;
    bool raw = false;
    int64_t max_ctx = 4096;
    std::string trace_routing;
};

std::vector<int32_t> prompt_tokens(const RunOptions& options, const std::string& store_dir,
                                   const text::Tokenizer& tokenizer) {
    if (options.raw) return tokenizer.encode(options.prompt, true);
    const text::ChatTemplate chat_template = text::ChatTemplate::load_directory(store_dir);
    nlohmann::ordered_json messages = nlohmann::ordered_json::array();
    messages.push_back({{"role", "user"}, {"content", options.prompt}});
    text::RenderOptions render;
    render.add_generation_prompt = true;
    const std::string rendered =
        chat_template.render(text::parse_messages(messages), nlohmann::ordered_json(), render);
    return tokenizer.encode(rendered, true);
}

void print_timings(const engine::GenerationStats& s, double load_seconds, bool first) {
    if (first) std::fprintf(stderr, "load: %.3f s\n", load_seconds);
    const auto rate = [](int64_t n, double secs) {
        return secs > 0 ? static_cast<double>(n) / secs : 0.0;
    };
    std::fprintf(stderr,
                 "prefill: %lld tokens in %.3f s (%.2f tok/s), %lld chunk(s) of up to %lld\n",
                 static_cast<long long>(s.prompt_tokens), s.prefill_seconds,
                 rate(s.prompt_tokens, s.prefill_seconds), static_cast<long long>(s.prefill_chunks),
                 static_cast<long long>(s.prefill_chunk_tokens));
    // The first generated token comes from the prefill; decode covers the rest.
    const int64_t decoded = std::max<int64_t>(s.generated_tokens - 1, 0);
    std::fprintf(stderr, "decode: %lld tokens in %.3f s (%.2f tok/s), %lld steps, stop: %s\n",
                 static_cast<long long>(decoded), s.decode_seconds, rate(decoded, s.decode_seconds),
                 static_cast<long long>(s.decode_steps), s.stop_reason.c_str());
    if (s.speculation) {
        std::fprintf(stderr, "mtp: draft 1 accepted %lld/%lld, draft 2 accepted %lld/%lld\n",
                     static_cast<long long>(s.drafts_accepted[0]),
                     static_cast<long long>(s.drafts_proposed[0]),
                     static_cast<long long>(s.drafts_accepted[1]),
                     static_cast<long long>(s.drafts_proposed[1]));
    }
}

int run_generate(const RunOptions& options) {
    // Everything that needs no model is checked before it loads.
    engine::validate_sampling_options(options.sampling);
    ModelOptions model_options = options.model;
    model_options.max_rows = 1 + options.drafts;
    model_options.drafts = options.drafts;
    model_options.max_ctx = options.max_ctx;
    // The tokenizer and the prompt come from the store before the weights load, so a prompt and
    // output that cannot fit --max-ctx fail at once.
    std::optional<text::Tokenizer> tokenizer;
    std::vector<int32_t> prompt;
    OpenedModel opened = load_model(
        model_options, [&](const std::string& store_dir, const model_data::qwen4_exp::Config& c) {
            tokenizer.emplace(text::Tokenizer::load_directory(store_dir));
            prompt = prompt_tokens(options, store_dir, *tokenizer);
            if (prompt.empty()) throw_invalid("the prompt encodes to no tokens");
            engine::ContextRequest request;
            request.prompt_tokens = static_cast<int64_t>(prompt.size());
            request.max_tokens = options.max_tokens;
            // Drafts need headroom only when they run: greedy decoding and an MTP head.
            const bool speculates =
                options.sampling.allows_speculation() && c.mtp_num_hidden_layers > 0;
            request.drafts = speculates ? options.drafts : 0;
            request.max_ctx = options.max_ctx;
            engine::check_context_budget(request);
            return options.max_ctx;
        });
    engine::LoadedModel* loaded = opened.loaded.get();

    engine::GenerationOptions generation;
    generation.prefill_counters = &loaded->prefill_counters();
    generation.max_tokens = options.max_tokens;
    generation.drafts = options.drafts;
    generation.sampling = options.sampling;
    generation.stop_at_eos = !options.no_eos;
    generation.max_ctx = options.max_ctx;
    generation.prefill_quantum = options.model.prefill_quantum;
    for (int64_t id : loaded->weights().config.eos_token_ids)
        generation.eos_ids.push_back(static_cast<int32_t>(id));
    if (auto eos = tokenizer->eos_token_id()) generation.eos_ids.push_back(*eos);

    std::ofstream trace;
    if (!options.trace_routing.empty()) {
        trace.open(options.trace_routing);
        if (!trace) throw_io("cannot write " + options.trace_routing);
        trace << "# step layer row expert:weight ...  (" << opened.store_dir() << ")\n";
        loaded->model().set_routing_trace(&trace);
    }
    for (int i = 0; i < options.repeat; ++i) {
        engine::Generator generator(loaded->model(), generation);
        text::StreamingDetokenizer detokenizer(*tokenizer, true);
        const auto tokenizer_vocab = static_cast<int32_t>(tokenizer->vocab_size());
        engine::GenerationStats stats = generator.generate(prompt, [&](int32_t token) {
            // Models pad their vocabulary past the tokenizer's; such ids have no text.
            if (token < tokenizer_vocab) std::cout << detokenizer.push(token) << std::flush;
            return true;
        });
        std::cout << detokenizer.finish() << '\n' << std::flush;
        print_timings(stats, loaded->load_seconds(), i == 0);
        std::fprintf(stderr, "memory_stats %s\n",
                     loaded->memory_stats(&generator.state()).dump().c_str());
        if (i == 0) {
            std::fprintf(stderr, "backend: %s\n", loaded->backend_name().c_str());
            std::fprintf(stderr, "expert pool: %s\n", loaded->pool_description().c_str());
        }
    }
    return 0;
}

}  // namespace

Command register_run(CLI::App& parent) {
    auto options = std::make_shared<RunOptions>();
    CLI::App* app = parent.add_subcommand(
        "run", "Generate text (the default command: cherenkov MODEL 'prompt')");
    add_model_options(app, options->model);
    app->add_option("prompt", options->prompt, "The user message (or raw text with --raw)")
        ->required();
    app->add_option("--max-tokens", options->max_tokens, "Tokens to generate (default 256)")
        ->check(at_least(0));
    app->add_option("--drafts", options->drafts,
                    "MTP drafts per step: 0, 1 or 2 (default 2, adaptive)")
        ->check(CLI::IsMember({0, 1, 2}));
    app->add_option("--temperature", options->sampling.temperature,
                    "Sampling temperature (default 0: greedy)");
    app->add_option("--top-k", options->sampling.top_k, "Keep the K most likely tokens (0: off)")
        ->check(at_least(0));
    app->add_option("--top-p", options->sampling.top_p, "Nucleus sampling mass (1: off)");
    app->add_option("--presence-penalty", options->sampling.presence_penalty,
                    "Penalty per seen token");
    app->add_option("--frequency-penalty", options->sampling.frequency_penalty,
                    "Penalty per occurrence");
    app->add_option("--repetition-penalty", options->sampling.repetition_penalty,
                    "CTRL-style penalty (1: off)");
    app->add_option("--seed", options->sampling.seed, "Sampling seed (default 0)");
    app->add_flag("--no-eos", options->no_eos, "Do not stop at EOS");
    app->add_option("--repeat", options->repeat,
                    "Generate N times with the loaded weights (fresh state)")
        ->check(at_least(1));
    app->add_flag("--raw", options->raw, "Use the prompt as raw text, without the chat template");
    app->add_option("--trace-routing", options->trace_routing,
                    "Write every step's expert routing to FILE (routing-trace text format)");
    app->add_option("--max-ctx", options->max_ctx,
                    "Context limit in tokens: prompt + output + draft headroom (default 4096)")
        ->check(at_least(1));
    return {app, [options]() { return run_generate(*options); }};
}

}  // namespace cherenkov::cli
