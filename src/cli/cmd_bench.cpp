// `cherenkov bench MODEL [--prompt-tokens N] [--gen-tokens N] [--drafts N] [--temperature F]
// [--top-p F] [--repeat N] [--json]`: prefill and decode throughput on a seeded random prompt,
// expert bytes read per token in each phase, and peak memory. Decoding is greedy unless
// --temperature is given (then sampled with the prompt seed; MTP drafts need greedy). Runs are
// repeated with fresh state on the loaded weights; the report gives each run and the best.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/flag_range.h"
#include "cli/model_options.h"
#include "engine/generate/generator.h"
#include "engine/generate/sampler.h"

namespace cherenkov::cli {
namespace {

struct BenchOptions {
    ModelOptions model;
    int64_t prompt_tokens = 128;
    int64_t gen_tokens = 32;
    int drafts = 0;
    float temperature = 0.0F;  // 0: greedy
    float top_p = 1.0F;
    int repeat = 3;
    uint64_t seed = 1;
    bool json = false;
};

int run_bench(const BenchOptions& options) {
    // Sampling is checked here, before the model loads (the Generator checks it again).
    engine::SamplingOptions sampling;
    sampling.temperature = options.temperature;
    sampling.top_p = options.top_p;
    sampling.seed = options.seed;
    engine::validate_sampling_options(sampling);
    if (options.drafts > 0 && !sampling.allows_speculation()) {
        throw_invalid("--drafts needs greedy decoding (--temperature 0)");
    }
    ModelOptions model_options = options.model;
    model_options.max_rows = 1 + options.drafts;
    model_options.drafts = options.drafts;
    // The prompt, the output and room for the drafts of the last step.
    if (options.prompt_tokens > INT64_MAX / 2 || options.gen_tokens > INT64_MAX / 2)
        throw_invalid("--prompt-tokens and --gen-tokens must each be below 2^62");
    const int64_t context = options.prompt_tokens + options.gen_tokens + 4;
    model_options.max_ctx = context;
    model_options.max_ctx_subject = [&options](int64_t n) {
        return "a context of " + std::to_string(n) + " tokens (--prompt-tokens " +
               std::to_string(options.prompt_tokens) + " + --gen-tokens " +
               std::to_string(options.gen_tokens) + " + 4)";
    };
    OpenedModel opened = load_model(model_options);
    engine::LoadedModel* loaded = opened.loaded.get();
    const int64_t vocab = loaded->model().vocab_size();
    std::mt19937_64 rng(options.seed);
    std::vector<int32_t> prompt(static_cast<size_t>(options.prompt_tokens));
    for (int32_t& t : prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));

    engine::GenerationOptions generation;
    generation.prefill_counters = &loaded->prefill_counters();
    generation.max_tokens = options.gen_tokens;
    generation.drafts = options.drafts;
    generation.stop_at_eos = false;
    generation.max_ctx = context;
    generation.prefill_quantum = options.model.prefill_quantum;
    generation.sampling = sampling;

    nlohmann::json runs = nlohmann::json::array();
    double best_prefill = 0.0;
    double best_decode = 0.0;
    for (int i = 0; i < options.repeat; ++i) {
        engine::Generator generator(loaded->model(), generation);
        const engine::GpuStageTotals prefill_gpu_start = loaded->model().prefill_gpu_stage_totals();
        const uint64_t bytes_start = loaded->expert_bytes_read();
        uint64_t bytes_after_prefill = 0;
        bool first = true;
        engine::GenerationStats stats = generator.generate(prompt, [&](int32_t) {
            if (first) bytes_after_prefill = loaded->expert_bytes_read();
            first = false;
            return true;
        });
        const uint64_t bytes_end = loaded->expert_bytes_read();
        const int64_t decoded = std::max<int64_t>(stats.generated_tokens - 1, 1);
        const double prefill_tps = static_cast<double>(stats.prompt_tokens) / stats.prefill_seconds;
        const double decode_tps = static_cast<double>(decoded) / stats.decode_seconds;
        best_prefill = std::max(best_prefill, prefill_tps);
        best_decode = std::max(best_decode, decode_tps);
        runs.push_back(
            {{"prefill_tokens_per_second", prefill_tps},
             {"decode_tokens_per_second", decode_tps},
             {"prefill_expert_bytes_per_token",
              static_cast<double>(bytes_after_prefill - bytes_start) /
                  static_cast<double>(stats.prompt_tokens)},
             {"decode_expert_bytes_per_token",
              static_cast<double>(bytes_end - bytes_after_prefill) / static_cast<double>(decoded)},
             {"prefill_chunks", stats.prefill_chunks},
             {"decode_steps", stats.decode_steps},
             {"drafts_proposed", stats.drafts_proposed},
             {"drafts_accepted", stats.drafts_accepted}});
        // This run's prefill calls alone: the first run's also fill the expert pool, which
        // would swamp the later runs' coverage in the totals (phases.prefill_gpu).
        const engine::GpuTiming prefill_gpu =
            engine::gpu_timing_of(loaded->model().prefill_gpu_stage_totals() - prefill_gpu_start);
        runs.back()["prefill_gpu_windows"] = prefill_gpu.windows;
        runs.back()["prefill_gpu_stage_fraction"] =
            prefill_gpu.stage_fraction ? nlohmann::json(*prefill_gpu.stage_fraction)
                                       : nlohmann::json();
        runs.back()["prefill_gpu_timeline_seconds"] = prefill_gpu.timeline_seconds;
    }
    // One observation serves the memory, experts and prefill objects (engine_stats.h).
    const engine::EngineStats observed = loaded->observe(nullptr);
    nlohmann::json report = {
        {"model", opened.store_dir()},
        {"backend", loaded->backend_name()},
        {"threads", loaded->pool().size()},
        {"expert_bits", loaded->expert_bits()},
        {"prompt_tokens", options.prompt_tokens},
        {"gen_tokens", options.gen_tokens},
        {"drafts", options.drafts},
        {"temperature", options.temperature},
        {"top_p", options.top_p},
        {"prefill_quantum", loaded->prefill_quantum().rows()},
        {"prefill_chunk_tokens", loaded->prefill_chunk_tokens()},
        {"load_seconds", loaded->load_seconds()},
        {"best_prefill_tokens_per_second", best_prefill},
        {"best_decode_tokens_per_second", best_decode},
        {"runs", runs},
        {"memory", engine::memory_json(observed)},
        {"expert_pool", loaded->pool_description()},
        {"experts", observed.experts ? engine::to_json(*observed.experts) : nlohmann::json()},
        {"prefill", engine::prefill_json(observed.prefill)},
        {"phases", engine::phases_json(observed)}};
    if (options.json) {
        std::cout << report.dump(2) << '\n';
        return 0;
    }
    std::printf(
        "model %s, backend %s, %d threads, Q%d experts, prompt %lld, generate %lld, "
        "drafts %d, %s, prefill chunks of %lld\n",
        opened.store_dir().c_str(), loaded->backend_name().c_str(), loaded->pool().size(),
        loaded->expert_bits(), static_cast<long long>(options.prompt_tokens),
        static_cast<long long>(options.gen_tokens), options.drafts,
        options.temperature > 0.0F ? "sampled" : "greedy",
        static_cast<long long>(loaded->prefill_chunk_tokens()));
    for (const auto& run : runs) {
        std::printf(
            "prefill %9.2f tok/s  decode %8.2f tok/s  expert MB/token: prefill %.3f decode %.3f\n",
            run["prefill_tokens_per_second"].get<double>(),
            run["decode_tokens_per_second"].get<double>(),
            run["prefill_expert_bytes_per_token"].get<double>() / 1e6,
            run["decode_expert_bytes_per_token"].get<double>() / 1e6);
    }
    std::printf("peak RSS %.1f MB, dense %.1f MB\n",
                report["memory"]["peak_rss_bytes"].get<double>() / 1e6,
                report["memory"]["dense_bytes"].get<double>() / 1e6);
    // The CUDA backend's host phases of host-routed decode layers, summed since load (every run).
    const nlohmann::json phases = observed.backend_stats.device
                                      ? observed.backend_stats.device->decode_phases
                                      : nlohmann::json();
    if (phases.is_object() && phases["layers"].get<uint64_t>() > 0) {
        const nlohmann::json& us = phases["us_per_layer"];
        std::printf(
            "decode host phases, us per host-routed layer: routing wait %.1f, prepare %.1f, "
            "read wait %.1f, miss queue %.1f, copy wait %.1f, finish %.1f\n",
            us["routing_wait"].get<double>(), us["prepare"].get<double>(),
            us["read_wait"].get<double>(), us["miss_queue"].get<double>(),
            us["copy_wait"].get<double>(), us["finish"].get<double>());
    }
    if (const std::optional<double> stage = observed.gpu_timing.stage_fraction) {
        std::printf("GPU stage coverage of %llu decode/MTP calls: %.3f (handoff gaps %.3f)\n",
                    static_cast<unsigned long long>(observed.gpu_timing.windows), *stage,
                    1.0 - *stage);
    }
    const engine::GpuTiming& prefill = observed.prefill_gpu_timing;
    if (const std::optional<double> stage = prefill.stage_fraction) {
        std::printf(
            "GPU stage coverage of %llu prefill calls: %.3f of %.3f s (handoff gaps %.3f)\n",
            static_cast<unsigned long long>(prefill.windows), *stage, prefill.timeline_seconds,
            1.0 - *stage);
        for (size_t i = 0; i < runs.size(); ++i) {
            const nlohmann::json& run = runs[i];
            if (run["prefill_gpu_stage_fraction"].is_null()) continue;
            std::printf("  run %zu: %.3f of %.4f s\n", i + 1,
                        run["prefill_gpu_stage_fraction"].get<double>(),
                        run["prefill_gpu_timeline_seconds"].get<double>());
        }
    }
    return 0;
}

}  // namespace

Command register_bench(CLI::App& parent) {
    auto options = std::make_shared<BenchOptions>();
    CLI::App* app =
        parent.add_subcommand("bench", "Measure prefill and decode speed, expert reads and memory");
    add_model_options(app, options->model);
    // The model's position limit and memory bound their sum (load_model).
    app->add_option("--prompt-tokens", options->prompt_tokens, "Prompt length (default 128)")
        ->check(at_least(1));
    app->add_option("--gen-tokens", options->gen_tokens, "Tokens to generate (default 32)")
        ->check(at_least(1));
    app->add_option("--drafts", options->drafts, "MTP drafts (default 0)")
        ->check(CLI::IsMember({0, 1, 2}));
    app->add_option("--temperature", options->temperature,
                    "Sampling temperature (default 0: greedy)");
    app->add_option("--top-p", options->top_p, "Nucleus sampling threshold (default 1: off)");
    app->add_option("--repeat", options->repeat, "Runs (default 3)")->check(at_least(1));
    app->add_option("--seed", options->seed, "Prompt seed");
    app->add_flag("--json", options->json, "JSON report on stdout");
    return {app, [options]() { return run_bench(*options); }};
}

}  // namespace cherenkov::cli
