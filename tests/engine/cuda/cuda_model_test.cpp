// The CUDA backend (engine/cuda/cuda_model.h) end to end against the transformers reference and
// the CPU backend: logits at every position of every fixture prompt, every traced stage of every
// layer, incremental schedules, checkpoint copies, MTP catch-up, greedy generation for drafts
// 0/1/2, a minimal device pool against one holding every expert (decode and prefill routed on the
// device), and prefill in chunks of a small --prefill-quantum. Skips without a device.
#include "engine/cuda/cuda_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "base/error.h"
#include "engine/cpu/thread_pool.h"
#include "engine/cuda/device_test.h"
#include "engine/experts/direct_expert_reader.h"
#include "engine/experts/mapped_expert_table.h"
#include "engine/generate/generator.h"
#include "engine/generate/sampler.h"
#include "engine/generate/sequence_switcher.h"
#include "engine/model/fixture_engine.h"
#include "engine/model/fixture_forms.h"
#include "engine/model/prefill_quantum.h"

namespace cherenkov::testing {
namespace {

constexpr float kLogitTolerance = 1e-3F;
using engine::cuda::have_device;

const char* const kPrompts[] = {"len1",  "len3",    "len4",      "len5", "len8",
                                "len33", "eos_mid", "eos_first", "chat"};

// A CPU FixtureEngine plus a CUDA model over the same weights with its own expert reader.
// prefill_quantum 0: the automatic quantum (the CLI's when --prefill-quantum is not given).
struct CudaFixture {
    explicit CudaFixture(const std::string& checkpoint, const std::string& pool = "max",
                         int64_t prefill_quantum = 64, const engine::Tuning& tuning = {})
        : cpu(checkpoint),
          experts(cpu.weights->store_dir + "/experts.bin", cpu.weights->manifest.experts) {
        engine::cuda::CudaModelOptions options;
        options.pool = engine::parse_pool_setting(pool);
        options.max_ctx = 512;
        if (prefill_quantum > 0)
            options.prefill_quantum = engine::PrefillQuantum::of(prefill_quantum);
        options.tuning = tuning;
        gpu = engine::cuda::make_cuda_model(*cpu.weights, experts, options);
    }
    FixtureEngine cpu;
    engine::DirectExpertReader experts;
    std::unique_ptr<engine::ModelBackend> gpu;
};

// The logits of `tokens` decoded one at a time from a fresh sequence, concatenated.
std::vector<float> step_logits(engine::ModelBackend& model, const std::vector<int32_t>& tokens) {
    engine::SequenceState state = model.new_sequence(256);
    std::vector<float> logits;
    for (size_t i = 0; i < tokens.size(); ++i) {
        engine::ForwardOptions options;
        options.all_logits = true;
        const auto r = model.forward(state, std::span(tokens).subspan(i, 1), options);
        logits.insert(logits.end(), r.logits.begin(), r.logits.end());
    }
    return logits;
}

std::vector<float> all_logits(engine::ModelBackend& model, const std::vector<int32_t>& tokens,
                              engine::ForwardTrace* trace = nullptr) {
    engine::SequenceState state = model.new_sequence(256);
    engine::ForwardOptions options;
    options.all_logits = true;
    options.trace = trace;
    return model.forward(state, tokens, options).logits;
}

class CudaLogits : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaLogits, EveryPositionMatchesTheReferenceAndTheCpu) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    const std::string checkpoint = GetParam();
    CudaFixture f(checkpoint);
    ReferenceFile reference(reference_of(checkpoint) + "/logits.safetensors");
    const int64_t vocab = f.gpu->vocab_size();
    float worst_ref = 0.0F;
    float worst_cpu = 0.0F;
    for (const char* prompt : kPrompts) {
        const std::vector<int32_t> tokens = reference.tokens(std::string("input_ids.") + prompt);
        std::vector<float> expected = reference.read<float>(std::string("logits.") + prompt);
        engine::ForwardTrace trace;
        std::vector<float> gpu = all_logits(*f.gpu, tokens, &trace);
        std::vector<float> cpu = all_logits(f.cpu.model, tokens);
        ASSERT_EQ(gpu.size(), expected.size()) << prompt;
        const auto n_rows = static_cast<int64_t>(tokens.size());
        const int64_t checked = first_tie_row(trace, n_rows);
        const auto keep = static_cast<size_t>(checked * vocab);
        gpu.resize(keep);
        cpu.resize(keep);
        expected.resize(keep);
        const float d_ref = max_abs_diff(gpu, expected);
        const float d_cpu = max_abs_diff(gpu, cpu);
        worst_ref = std::max(worst_ref, d_ref);
        worst_cpu = std::max(worst_cpu, d_cpu);
        EXPECT_LE(d_ref, kLogitTolerance) << checkpoint << " " << prompt << " vs reference";
        EXPECT_LE(d_cpu, kLogitTolerance) << checkpoint << " " << prompt << " vs cpu";
    }
    std::printf("%s: worst |Δlogit| %.3g vs reference, %.3g vs cpu\n", checkpoint.c_str(),
                static_cast<double>(worst_ref), static_cast<double>(worst_cpu));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaLogits, CHERENKOV_FIXTURE_FORMS, fixture_form_name);

// Every stage the CPU traces, compared relative to the stage's RMS; prints the first stage (in
// forward order) that diverges, which is where a kernel bug shows.
TEST(CudaModel, EveryTracedStageMatchesTheCpu) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    for (const char* checkpoint : {"tiny_a/hf_flat_fused", "tiny_c/hf_nested_fused"}) {
        CudaFixture f(checkpoint);
        ReferenceFile reference(reference_of(checkpoint) + "/logits.safetensors");
        const std::vector<int32_t> tokens = reference.tokens("input_ids.len33");
        engine::ForwardTrace gpu;
        engine::ForwardTrace cpu;
        all_logits(*f.gpu, tokens, &gpu);
        all_logits(f.cpu.model, tokens, &cpu);
        int64_t n_bad = 0;
        for (const auto& [name, expected] : cpu.tensors) {
            if (name.ends_with("margin") || name.ends_with("selected_blocks")) continue;
            auto it = gpu.tensors.find(name);
            ASSERT_NE(it, gpu.tensors.end()) << checkpoint << ": stage " << name << " not traced";
            ASSERT_EQ(it->second.size(), expected.size()) << checkpoint << " " << name;
            double sum = 0.0;
            for (float v : expected) sum += static_cast<double>(v) * v;
            const double rms = std::sqrt(sum / std::max<size_t>(expected.size(), 1)) + 1e-12;
            const double rel = max_abs_diff(it->second, expected) / rms;
            if (rel > 1e-4) {
                ++n_bad;
                std::printf("%s: stage %s differs by %.3g of its rms\n", checkpoint, name.c_str(),
                            rel);
            }
        }
        EXPECT_EQ(n_bad, 0) << checkpoint;
    }
}

TEST(CudaModel, IncrementalSchedulesEqualTheOnePass) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    CudaFixture f("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> tokens = reference.tokens("input_ids.len33");
    const std::vector<float> whole = all_logits(*f.gpu, tokens);
    for (const std::vector<size_t>& chunks :
         {std::vector<size_t>{11}, std::vector<size_t>{3, 1, 4, 1, 5, 9, 2, 6},
          std::vector<size_t>{1}}) {
        engine::SequenceState state = f.gpu->new_sequence(256);
        std::vector<float> logits;
        size_t at = 0;
        for (size_t i = 0; at < tokens.size(); ++i) {
            const size_t n = std::min(chunks[i % chunks.size()], tokens.size() - at);
            engine::ForwardOptions options;
            options.all_logits = true;
            auto r = f.gpu->forward(state, std::span(tokens).subspan(at, n), options);
            logits.insert(logits.end(), r.logits.begin(), r.logits.end());
            at += n;
        }
        EXPECT_LE(max_abs_diff(logits, whole), 1e-4F) << "chunks starting " << chunks[0];
    }
}

TEST(CudaModel, CheckpointCopyAndRollbackContinueLikeAFreshRun) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    CudaFixture f("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> tokens = reference.tokens("input_ids.len33");
    const std::span<const int32_t> all(tokens);
    engine::ForwardOptions last;
    engine::SequenceState state = f.gpu->new_sequence(256);
    f.gpu->forward(state, all.first(20), last);
    engine::SequenceState copy = state;  // a checkpoint
    const auto a = f.gpu->forward(state, all.subspan(20), last).logits;
    const auto b = f.gpu->forward(copy, all.subspan(20), last).logits;
    EXPECT_EQ(a, b);

    // Verify 3 rows with snapshots and keep 1: equals a run that saw only that row, up to
    // rounding. The prefixes (20 and 21 rows) take the chunked GDN recurrence, whose rounding
    // depends on where the call and its 64-row chunks start, and the verified row the
    // token-by-token one, so the two states differ by float rounding (~1e-6 of their scale); a
    // wrong snapshot or restore is off by far more than the bound.
    engine::SequenceState verified = f.gpu->new_sequence(256);
    f.gpu->forward(verified, all.first(20), last);
    engine::ForwardOptions snap;
    snap.snapshot_rows = true;
    f.gpu->forward(verified, all.subspan(20, 3), snap);
    f.gpu->commit(verified, 1);
    EXPECT_EQ(verified.position, 21);
    const auto after_rollback = f.gpu->forward(verified, all.subspan(21), last).logits;
    engine::SequenceState plain = f.gpu->new_sequence(256);
    f.gpu->forward(plain, all.first(21), last);
    const auto expected = f.gpu->forward(plain, all.subspan(21), last).logits;
    EXPECT_LE(max_abs_diff(after_rollback, expected), 1e-4F);
}

TEST(CudaModel, MtpCatchUpMatchesTheCpu) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    CudaFixture f("tiny_a/hf_flat_fused");
    ASSERT_TRUE(f.gpu->has_mtp());
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> tokens = reference.tokens("input_ids.len33");
    const std::span<const int32_t> all(tokens);
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<float>> chained;
    for (engine::ModelBackend* model :
         {f.gpu.get(), static_cast<engine::ModelBackend*>(&f.cpu.model)}) {
        engine::SequenceState state = model->new_sequence(256);
        engine::ForwardOptions options;
        options.keep_residuals = true;
        model->forward(state, all.first(tokens.size() - 1), options);
        engine::MtpResult r = model->mtp_catch_up(state, tokens.back(), true);
        logits.push_back(r.logits);
        const int32_t draft = static_cast<int32_t>(engine::argmax(
            std::span<const float>(r.logits).last(static_cast<size_t>(model->vocab_size()))));
        chained.push_back(model->mtp_chain(state, draft, state.position, 1).logits);
    }
    EXPECT_LE(max_abs_diff(logits[0], logits[1]), kLogitTolerance);
    EXPECT_LE(max_abs_diff(chained[0], chained[1]), kLogitTolerance);
}

std::vector<int32_t> generate(engine::ModelBackend& model, const std::vector<int32_t>& prompt,
                              int drafts, engine::GenerationStats* stats = nullptr) {
    engine::GenerationOptions options;
    options.max_tokens = 48;
    options.drafts = drafts;
    options.stop_at_eos = false;
    options.max_ctx = 256;
    return generate_tokens(model, prompt, options, stats);
}

TEST(CudaModel, GreedyOutputEqualsTheCpuForEveryDraftCount) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    CudaFixture f("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    const std::vector<int32_t> expected = generate(f.cpu.model, prompt, 0);
    for (int drafts = 0; drafts <= 2; ++drafts) {
        engine::GenerationStats stats;
        EXPECT_EQ(generate(*f.gpu, prompt, drafts, &stats), expected) << "drafts " << drafts;
        if (drafts > 0) {
            EXPECT_GT(stats.drafts_proposed[0], 0);
        }
    }
}

// The server's switching: two generations share one set of device caches, each parked to host
// memory (BackendState::save) while the other runs and restored before its next step, with
// MTP drafts, rollbacks and graphs in play. Each gets the CPU's solo text.
TEST(CudaModel, ParkedAndRestoredSequencesContinueExactly) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    CudaFixture f("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompts[2] = {reference.tokens("input_ids.chat"),
                                             reference.tokens("input_ids.len33")};
    engine::GenerationOptions options;
    options.max_tokens = 48;
    options.drafts = 2;
    options.stop_at_eos = false;
    options.max_ctx = 256;
    engine::SequenceSwitcher switcher(*f.gpu, 256);
    ASSERT_TRUE(switcher.shares_caches());
    engine::Generator generators[2] = {engine::Generator(*f.gpu, options),
                                       engine::Generator(*f.gpu, options)};
    engine::ParkedCaches parked[2];
    std::vector<int32_t> out[2];
    for (int i = 0; i < 2; ++i) generators[i].start(prompts[i], switcher.new_state(256));
    bool running[2] = {true, true};
    while (running[0] || running[1]) {
        for (int i = 0; i < 2; ++i) {
            if (!running[i]) continue;
            switcher.activate(generators[i].state(), parked[i]);
            running[i] = generators[i].step(
                [&](const engine::EmittedToken& t) {
                    out[i].push_back(t.token);
                    return true;
                },
                7);
            if (running[i]) {
                switcher.park(generators[i].state(), parked[i]);
            } else {
                switcher.release(generators[i].state());
            }
        }
    }
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(out[i], generate(f.cpu.model, prompts[i], 2)) << "prompt " << i;
        EXPECT_FALSE(parked[i].bytes.empty());
    }
}

// --pool-gb for one layer-step of 3 rows (3·k records), in decimal GB as the flag takes it.
std::string minimal_pool(const std::string& checkpoint) {
    FixtureEngine probe(checkpoint);
    const auto& layout = probe.weights->manifest.experts;
    const double slot = static_cast<double>(store::align_up(layout.record_bytes, 256));
    const double gb =
        slot * 3.0 * static_cast<double>(probe.weights->config.num_experts_per_tok) / 1e9;
    char text[64];
    std::snprintf(text, sizeof(text), "%.9f", gb);
    return text;
}

// Options of a CUDA model over a minimal device pool of `checkpoint` (every decode call misses),
// context 512, prefill quantum 64, its misses dealt by `cpu_experts` (--cpu-experts) to `pool`.
engine::cuda::CudaModelOptions minimal_pool_options(const std::string& checkpoint,
                                                    const char* cpu_experts = "off",
                                                    engine::ThreadPool* pool = nullptr) {
    engine::cuda::CudaModelOptions options;
    options.pool = engine::parse_pool_setting(minimal_pool(checkpoint));
    options.max_ctx = 512;
    options.prefill_quantum = engine::PrefillQuantum::of(64);
    options.cpu_experts = engine::cuda::CpuExpertsSetting::parse(cpu_experts, "--cpu-experts");
    options.cpu_pool = pool;
    return options;
}

// Once every layer is routed on the device, a decode step is one CUDA graph from the embedding to
// the token selection, replayed at every position (the QSA kernels read it on the device). From a
// 3-token prompt, 48 tokens take the QSA layers from dense to block-sparse attention and complete
// a block key every 4 positions; the greedy text is the CPU's, for 0-2 drafts (verification calls
// with snapshots, then commits that roll the caches back), with the graphs replayed; with graphs
// off it is the same.
TEST(CudaModel, WholeDecodeStepsReplayedAsOneGraphGiveTheCpuText) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.len3");
    ASSERT_EQ(prompt.size(), 3U);
    CudaFixture f("tiny_a/hf_flat_fused");
    const std::vector<int32_t> expected = generate(f.cpu.model, prompt, 0);
    for (int drafts = 0; drafts <= 2; ++drafts) {
        EXPECT_EQ(generate(*f.gpu, prompt, drafts), expected) << "drafts " << drafts;
    }
    const nlohmann::json stats = engine::backend_stats_json(f.gpu->backend_stats());
    EXPECT_GT(stats["cuda_step_graph_captures"].get<uint64_t>(), 0U);
    // A key's first step runs kernel by kernel, its second is captured; the rest are replays.
    EXPECT_GT(stats["cuda_step_graph_launches"].get<uint64_t>(),
              stats["cuda_step_graph_captures"].get<uint64_t>());

    CudaFixture off("tiny_a/hf_flat_fused", "max", 64, engine::Tuning{.cuda_graphs = false});
    EXPECT_EQ(generate(*off.gpu, prompt, 2), expected);
    EXPECT_EQ(engine::backend_stats_json(off.gpu->backend_stats())["cuda_step_graph_launches"]
                  .get<uint64_t>(),
              0U);

    // A pool too small for the table routes every layer on the host: each layer's work up to
    // the routing read-back (QSA and PLE layers included) is replayed as a graph instead.
    CudaFixture small("tiny_a/hf_flat_fused", minimal_pool("tiny_a/hf_flat_fused"));
    EXPECT_EQ(generate(*small.gpu, prompt, 2), expected);
    const nlohmann::json small_stats = engine::backend_stats_json(small.gpu->backend_stats());
    EXPECT_EQ(small_stats["cuda_step_graph_launches"].get<uint64_t>(), 0U);
    EXPECT_GT(small_stats["cuda_graph_launches"].get<uint64_t>(),
              small_stats["cuda_graph_captures"].get<uint64_t>());
}

TEST(CudaModel, MinimalDevicePoolGivesTheSameBitsAsAFullOne) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    CudaFixture full("tiny_a/hf_flat_fused", "max");
    CudaFixture small("tiny_a/hf_flat_fused", minimal_pool("tiny_a/hf_flat_fused"));
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    EXPECT_EQ(all_logits(*full.gpu, prompt), all_logits(*small.gpu, prompt));
    EXPECT_EQ(generate(*full.gpu, prompt, 2), generate(*small.gpu, prompt, 2));
}

// Once a pool that holds the whole table has every expert of a layer, decode calls route that
// layer on the device, with no host round trip. Decoding step by step with 1-3 rows gives the
// same logits, bit for bit, as a pool too small for that (every layer's routing read back and
// handled by the host), with graphs on and off.
TEST(CudaModel, LayersHeldWholeAreRoutedOnTheDeviceWithTheHostPathsBits) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    const auto decode = [&](engine::ModelBackend& model) {
        engine::SequenceState state = model.new_sequence(256);
        std::vector<std::vector<float>> logits;
        engine::ForwardOptions options;
        options.all_logits = true;
        logits.push_back(model.forward(state, prompt, options).logits);  // prefill: host path
        size_t next = 0;
        for (int step = 0; step < 12; ++step) {
            const size_t rows = 1 + static_cast<size_t>(step % 3);
            const std::vector<int32_t> tokens(prompt.begin() + static_cast<ptrdiff_t>(next),
                                              prompt.begin() + static_cast<ptrdiff_t>(next + rows));
            next += rows;
            logits.push_back(model.forward(state, tokens, options).logits);
        }
        return logits;
    };
    for (const char* graphs : {"1", "0"}) {
        const engine::Tuning tuning{.cuda_graphs = graphs[0] == '1'};
        CudaFixture full("tiny_a/hf_flat_fused", "max", 64, tuning);
        CudaFixture small("tiny_a/hf_flat_fused", minimal_pool("tiny_a/hf_flat_fused"), 64, tuning);
        const auto on_device = decode(*full.gpu);
        const auto on_host = decode(*small.gpu);
        ASSERT_EQ(on_device.size(), on_host.size());
        for (size_t i = 0; i < on_device.size(); ++i)
            EXPECT_EQ(on_device[i], on_host[i]) << "call " << i << " graphs " << graphs;

        const nlohmann::json full_stats = engine::backend_stats_json(full.gpu->backend_stats());
        const nlohmann::json small_stats = engine::backend_stats_json(small.gpu->backend_stats());
        // The prompt routes to every expert of the 4 trunk layers; 12 decode calls × 4 layers.
        EXPECT_EQ(full_stats["device_routed_layers"].get<int64_t>(), 4) << graphs;
        EXPECT_EQ(full_stats["device_routed_calls"].get<uint64_t>(), 48U) << graphs;
        // With every layer routed on the device a step is one graph (graphs on).
        EXPECT_EQ(full_stats["cuda_step_graph_launches"].get<uint64_t>() > 0, graphs[0] == '1');
        EXPECT_EQ(small_stats["device_routed_calls"].get<uint64_t>(), 0U) << graphs;
        // Host phase timing covers the decode calls of layers routed on the host, and only those.
        const nlohmann::json& phases = small_stats["decode_phases"];
        EXPECT_EQ(phases["layers"].get<uint64_t>(), 48U) << graphs;
        EXPECT_GT(phases["seconds"]["routing_wait"].get<double>(), 0.0) << graphs;
        EXPECT_GT(phases["seconds"]["finish"].get<double>(), 0.0) << graphs;
        EXPECT_EQ(full_stats["decode_phases"]["layers"].get<uint64_t>(), 0U) << graphs;
        // The shared expert rides in the routed launches (the same bits as its own launch).
        EXPECT_EQ(full_stats["shared_expert_layers_on_expert_kernels"].get<int64_t>(), 4);
        // Uses routed on the device count as hits, as the host path's do.
        EXPECT_EQ(full_stats["device_expert_hits"].get<uint64_t>() +
                      full_stats["device_expert_uploads"].get<uint64_t>(),
                  small_stats["device_expert_hits"].get<uint64_t>() +
                      small_stats["device_expert_uploads"].get<uint64_t>())
            << graphs;
    }
}

// Prefill calls on layers the pool holds whole are routed on the device too (the routing grouped
// by expert there, no read-back per layer): the same logits at every position, bit for bit, as the
// first prefill (host path, while the pool fills) and as a pool too small for the device path, in
// one chunk and in chunks of 8 rows.
TEST(CudaModel, PrefillOnLayersHeldWholeIsRoutedOnTheDeviceWithTheHostPathsBits) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    ASSERT_GT(prompt.size(), 16U);  // more than a decode call's rows, also in chunks of 8
    const auto prefill = [&](engine::ModelBackend& model, int64_t chunk) {
        engine::SequenceState state = model.new_sequence(256);
        engine::ForwardOptions options;
        options.all_logits = true;
        int64_t calls = 0;
        auto logits =
            engine::forward_in_chunks(model, state, prompt, options, chunk, &calls).logits;
        return std::make_pair(std::move(logits), calls);
    };
    for (const int64_t chunk : {int64_t{512}, int64_t{8}}) {
        CudaFixture full("tiny_a/hf_flat_fused", "max");
        CudaFixture small("tiny_a/hf_flat_fused", minimal_pool("tiny_a/hf_flat_fused"));
        const auto routed_calls = [&] {
            return engine::backend_stats_json(full.gpu->backend_stats())["device_routed_calls"]
                .get<uint64_t>();
        };
        const auto filling = prefill(*full.gpu, chunk);
        const uint64_t before = routed_calls();
        const auto on_device = prefill(*full.gpu, chunk);
        // Every call of the second prefill, in each of the 4 layers.
        EXPECT_EQ(routed_calls() - before, 4 * static_cast<uint64_t>(on_device.second))
            << "chunk " << chunk;
        EXPECT_EQ(on_device.first, filling.first) << "chunk " << chunk;
        EXPECT_EQ(on_device.first, prefill(*small.gpu, chunk).first) << "chunk " << chunk;
    }
}

// Decode and MTP calls are timed on the GPU (seed "Phase timing"): one window per call of at most
// a decode step's rows, none for a prefill call, whose windows go to their own totals. A step
// routed wholly on the device is one stage (its timeline all covered); layers routed on the host
// leave handoff gaps (routing read-backs).
TEST(CudaModel, DecodeCallsAreTimedOnTheGpuWithHandoffGapsOnlyOnTheHostPath) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    ASSERT_GT(prompt.size(), 8U);  // its prefill is no decode call
    const auto decode = [&](engine::ModelBackend& model) {
        engine::SequenceState state = model.new_sequence(256);
        model.forward(state, prompt, {});
        for (size_t step = 0; step < 6; ++step) {
            const std::vector<int32_t> token{prompt[step]};
            model.forward(state, token, {});
        }
        return model.gpu_stage_totals();
    };
    CudaFixture full("tiny_a/hf_flat_fused", "max");
    CudaFixture small("tiny_a/hf_flat_fused", minimal_pool("tiny_a/hf_flat_fused"));
    for (auto* f : {&full, &small}) {
        const engine::GpuStageTotals totals = decode(*f->gpu);
        EXPECT_TRUE(totals.available) << totals.error;
        EXPECT_EQ(totals.windows, 6U);
        EXPECT_EQ(totals.invalid_windows, 0U);
        EXPECT_GT(totals.timeline_seconds, 0.0);
        EXPECT_GT(totals.stage_seconds, 0.0);
        EXPECT_LE(totals.stage_seconds, totals.timeline_seconds);
    }
    ASSERT_GT(engine::backend_stats_json(full.gpu->backend_stats())["cuda_step_graph_launches"]
                  .get<uint64_t>(),
              0U);
    const engine::GpuStageTotals whole = full.gpu->gpu_stage_totals();
    EXPECT_EQ(whole.stage_seconds, whole.timeline_seconds);
    const engine::GpuStageTotals host = small.gpu->gpu_stage_totals();
    EXPECT_LT(host.stage_seconds, host.timeline_seconds);
    // Generation with drafts adds the MTP calls' windows.
    generate(*small.gpu, prompt, 2);
    EXPECT_GT(small.gpu->gpu_stage_totals().windows, host.windows + 2);
    EXPECT_EQ(small.gpu->gpu_stage_totals().invalid_windows, 0U);
    // Prefill calls are timed apart, one window each (the generation's MTP calls over the prompt
    // too), with the host's gather of the n-gram rows as a handoff gap: the tiny model's first
    // layer leaves the device idle meanwhile.
    for (auto* f : {&full, &small}) {
        const engine::GpuStageTotals prefill = f->gpu->prefill_gpu_stage_totals();
        EXPECT_TRUE(prefill.available) << prefill.error;
        if (f == &full) {
            EXPECT_EQ(prefill.windows, 1U);
        } else {
            EXPECT_GE(prefill.windows, 2U);
        }
        EXPECT_EQ(prefill.invalid_windows, 0U);
        EXPECT_GT(prefill.stage_seconds, 0.0);
        EXPECT_LT(prefill.stage_seconds, prefill.timeline_seconds);
    }
}

// Decode segments replayed as CUDA graphs, and independent projections on side streams, give
// the same bits as launching every kernel on one stream.
TEST(CudaModel, GraphsAndSideStreamsGiveTheSameBitsAsOneStream) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    std::vector<std::vector<int32_t>> outputs;
    for (const auto& [graphs, streams] :
         {std::pair{"1", "1"}, std::pair{"0", "1"}, std::pair{"1", "0"}, std::pair{"0", "0"}}) {
        const engine::Tuning tuning{.cuda_graphs = graphs[0] == '1',
                                    .side_streams = streams[0] == '1'};
        CudaFixture f("tiny_a/hf_flat_fused", "max", 64, tuning);
        outputs.push_back(generate(*f.gpu, prompt, 2));
        const nlohmann::json stats = engine::backend_stats_json(f.gpu->backend_stats());
        EXPECT_EQ(stats["cuda_side_streams"].get<bool>(), streams[0] == '1');
        // Layer segments (while the pool fills) and whole steps (once every layer is routed on
        // the device).
        const uint64_t launches = stats["cuda_graph_launches"].get<uint64_t>() +
                                  stats["cuda_step_graph_launches"].get<uint64_t>();
        if (graphs[0] == '1') {
            EXPECT_GT(launches, 0U);
        } else {
            EXPECT_EQ(launches, 0U);
        }
        EXPECT_EQ(outputs.back(), outputs.front()) << "graphs " << graphs << " streams " << streams;
    }
}

// A model built with a small --prefill-quantum reports it as its row limit, and callers asking
// for 256-row chunks prefill in chunks of that size: the same logits as one call on a model
// with a large quantum, and the same greedy text (drafts off and on) as that model and the CPU.
TEST(CudaModel, SmallPrefillQuantumPrefillsALongerPromptInChunksIdentically) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    CudaFixture large("tiny_a/hf_flat_fused", "max", 256);
    CudaFixture small("tiny_a/hf_flat_fused", "max", 5);
    EXPECT_EQ(large.gpu->max_rows_per_call(), 256);
    EXPECT_EQ(small.gpu->max_rows_per_call(), 5);
    const nlohmann::json small_stats = engine::backend_stats_json(small.gpu->backend_stats());
    EXPECT_EQ(small_stats["prefill_rows_per_call"].get<int64_t>(), 5);
    EXPECT_LT(
        small_stats["device_scratch_reserved_bytes"].get<uint64_t>(),
        engine::backend_stats_json(large.gpu->backend_stats())["device_scratch_reserved_bytes"]
            .get<uint64_t>());

    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> tokens = reference.tokens("input_ids.len33");
    const std::vector<float> whole = all_logits(*large.gpu, tokens);
    engine::SequenceState state = small.gpu->new_sequence(256);
    engine::ForwardOptions all;
    all.all_logits = true;
    int64_t calls = 0;
    const engine::ForwardResult chunked = engine::forward_in_chunks(
        *small.gpu, state, tokens, all,
        engine::prefill_chunk_rows(*small.gpu, engine::PrefillQuantum::of(256)), &calls);
    EXPECT_EQ(calls, 7);
    EXPECT_LE(max_abs_diff(chunked.logits, whole), 1e-4F);

    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    for (const int drafts : {0, 2}) {
        engine::GenerationOptions options;
        options.max_tokens = 32;
        options.drafts = drafts;
        options.stop_at_eos = false;
        options.max_ctx = 256;
        options.prefill_quantum = engine::PrefillQuantum::of(256);
        const std::vector<int32_t> expected = generate_tokens(large.cpu.model, prompt, options);
        EXPECT_EQ(generate_tokens(*large.gpu, prompt, options), expected) << "drafts " << drafts;
        engine::GenerationStats stats;
        EXPECT_EQ(generate_tokens(*small.gpu, prompt, options, &stats), expected)
            << "drafts " << drafts;
        EXPECT_EQ(stats.prefill_chunk_tokens, 5);
        EXPECT_EQ(stats.prefill_chunks, (static_cast<int64_t>(prompt.size()) + 4) / 5);
    }
}

// A quantum nobody set grows into the device memory the pool leaves: up to the resident rows
// beside a pool that holds the whole table, up to the streaming rows beside an explicit pool
// smaller than the table (a GPU holds either beside this fixture); a quantum that was set stays.
TEST(CudaModel, AutomaticPrefillQuantumGrowsIntoTheMemoryThePoolLeaves) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    CudaFixture whole("tiny_a/hf_flat_fused", "max", 0);
    EXPECT_EQ(whole.gpu->max_rows_per_call(), engine::kResidentPrefillQuantum);
    CudaFixture streamed("tiny_a/hf_flat_fused", minimal_pool("tiny_a/hf_flat_fused"), 0);
    EXPECT_EQ(streamed.gpu->max_rows_per_call(), engine::kStreamingPrefillQuantum);
    CudaFixture set("tiny_a/hf_flat_fused", "max", 512);
    EXPECT_EQ(set.gpu->max_rows_per_call(), 512);
}

// With the table mapped (`--host-pool-gb mapped`) the device pool's misses are copied straight
// from the page-locked mapping: the same bits as records read into buffers, the whole table
// page-locked, and every fetched record counted as served. Copying the next layer's predicted
// experts ahead (--tuning next_layer_copies, which only a mapped table does) changes no bits,
// whether none, one or every predicted expert goes ahead.
TEST(CudaModel, AMappedTableGivesTheSameBitsAsReadRecords) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    const std::string checkpoint = "tiny_a/hf_flat_fused";
    CudaFixture read(checkpoint, minimal_pool(checkpoint));
    FixtureEngine cpu(checkpoint);
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    const std::vector<float> expected_logits = all_logits(*read.gpu, prompt);
    const std::vector<int32_t> expected = generate(*read.gpu, prompt, 2);
    for (const int64_t copies : {0, 1, 64}) {
        engine::MappedExpertTable mapped(cpu.weights->store_dir + "/experts.bin",
                                         cpu.weights->manifest.experts);
        engine::cuda::CudaModelOptions options = minimal_pool_options(checkpoint);
        options.tuning.next_layer_copies = copies;
        const std::unique_ptr<engine::ModelBackend> gpu =
            engine::cuda::make_cuda_model(*cpu.weights, mapped, options);
        EXPECT_EQ(engine::backend_stats_json(gpu->backend_stats())
                      .value("host_records_page_locked_bytes", uint64_t{0}),
                  cpu.weights->manifest.experts.file_bytes());
        EXPECT_EQ(all_logits(*gpu, prompt), expected_logits) << "copies " << copies;
        EXPECT_EQ(generate(*gpu, prompt, 2), expected) << "copies " << copies;
        EXPECT_GT(mapped.records_served(), 0u);
        const nlohmann::json stats = engine::backend_stats_json(gpu->backend_stats());
        const auto ahead = stats["experts_copied_ahead"].get<uint64_t>();
        if (copies == 0) {
            EXPECT_EQ(ahead, 0U);
        } else {
            EXPECT_GT(ahead, 0U) << "copies " << copies;
            EXPECT_LE(stats["experts_used_ahead"].get<uint64_t>(), ahead);
        }
    }
}

// --cpu-experts: the decode misses of a minimal device pool computed on the CPU, all of them
// (share 1), half, or as the measured costs deal them (auto), beside off. Decoding token by token,
// every step's logits stay within the reference tolerance of the CPU backend's, the greedy text
// with 0 and 2 drafts (MTP verification rows too) is the CPU's, and the figures count what each
// side took.
TEST(CudaModel, DecodeMissesComputedOnTheCpuKeepTheCpusLogitsAndText) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    const std::string checkpoint = "tiny_a/hf_flat_fused";
    FixtureEngine cpu(checkpoint);
    engine::DirectExpertReader experts(cpu.weights->store_dir + "/experts.bin",
                                       cpu.weights->manifest.experts);
    engine::ThreadPool pool(4);
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    const std::vector<int32_t> tokens = reference.tokens("input_ids.len33");
    const std::vector<float> expected_logits = step_logits(cpu.model, tokens);
    const std::vector<int32_t> expected = generate(cpu.model, prompt, 0);
    for (const char* setting : {"1", "0.5", "auto", "off"}) {
        const engine::cuda::CudaModelOptions options =
            minimal_pool_options(checkpoint, setting, &pool);
        const std::unique_ptr<engine::ModelBackend> gpu =
            engine::cuda::make_cuda_model(*cpu.weights, experts, options);
        EXPECT_LE(max_abs_diff(step_logits(*gpu, tokens), expected_logits), kLogitTolerance)
            << setting;
        EXPECT_EQ(generate(*gpu, prompt, 0), expected) << setting;
        EXPECT_EQ(generate(*gpu, prompt, 2), expected) << setting;
        const nlohmann::json stats = engine::backend_stats_json(gpu->backend_stats());
        const auto computed = stats["cpu_experts_computed"].get<uint64_t>();
        const auto copied = stats["cpu_experts_copied"].get<uint64_t>();
        EXPECT_EQ(stats["cpu_experts"].get<std::string>(), setting);
        const std::string name = setting;
        if (name == "off") {
            EXPECT_EQ(computed, 0U);
            EXPECT_EQ(copied, 0U);
        } else if (name == "1") {
            EXPECT_GT(computed, 0U);
            EXPECT_EQ(copied, 0U);
        } else {
            // Half: each call's misses alternate, the CPU taking the odd one. Auto: at least the
            // timed copy and the timed computation.
            EXPECT_GT(computed, 0U) << setting;
            EXPECT_GT(copied, 0U) << setting;
            if (name == "0.5") {
                EXPECT_GE(computed, copied);
            }
        }
    }
}

// With int8 activations for the CPU's share (--cpu-activations auto's choice on CUDA), every
// miss of a minimal pool computed on the CPU: the token-by-token logits stay within the int8
// tolerance of the CPU backend's float ones (ReferenceLogits.Q8ActivationsStayNearTheReference's
// bounds, which hold the whole model in q8), and the figures name the precision.
TEST(CudaModel, CpuExpertsInInt8StayNearTheCpusLogits) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    const std::string checkpoint = "tiny_a/hf_flat_fused";
    FixtureEngine cpu(checkpoint);
    engine::DirectExpertReader experts(cpu.weights->store_dir + "/experts.bin",
                                       cpu.weights->manifest.experts);
    engine::ThreadPool pool(4);
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> tokens = reference.tokens("input_ids.len33");
    const std::vector<float> expected = step_logits(cpu.model, tokens);
    engine::cuda::CudaModelOptions options = minimal_pool_options(checkpoint, "1", &pool);
    options.cpu_activations = engine::ActivationPrecision::Q8;
    const std::unique_ptr<engine::ModelBackend> gpu =
        engine::cuda::make_cuda_model(*cpu.weights, experts, options);
    const std::vector<float> got = step_logits(*gpu, tokens);
    ASSERT_EQ(got.size(), expected.size());
    double error = 0.0;
    double signal = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        error += (got[i] - expected[i]) * (got[i] - expected[i]);
        signal += expected[i] * expected[i];
    }
    EXPECT_LE(std::sqrt(error / signal), 0.05);
    EXPECT_LE(max_abs_diff(got, expected), 1.0F);
    EXPECT_GT(max_abs_diff(got, expected), 0.0F);  // the int8 path did run
    const nlohmann::json stats = engine::backend_stats_json(gpu->backend_stats());
    EXPECT_EQ(stats["cpu_experts_activations"].get<std::string>(), "q8");
    EXPECT_GT(stats["cpu_experts_computed"].get<uint64_t>(), 0U);
}

TEST(CudaModel, PrefillQuantumOutOfRangeNamesTheFlag) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    FixtureEngine cpu("tiny_a/hf_flat_fused");
    engine::DirectExpertReader experts(cpu.weights->store_dir + "/experts.bin",
                                       cpu.weights->manifest.experts);
    engine::cuda::CudaModelOptions options;
    options.pool = engine::PoolSetting::of(engine::PoolMode::Max);
    options.max_ctx = 512;
    try {
        // A quantum out of range cannot be made, so no model is built with one.
        options.prefill_quantum = engine::PrefillQuantum::of(0);
        engine::cuda::make_cuda_model(*cpu.weights, experts, options);
        FAIL() << "accepted --prefill-quantum 0";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(e.what()).find("--prefill-quantum"), std::string::npos) << e.what();
    }
}

TEST(CudaModel, BuiltWithoutCudaOrWithoutDeviceSaysSo) {
    if (have_device()) GTEST_SKIP() << "a device is present";
    FixtureEngine cpu("tiny_a/hf_flat_fused");
    engine::DirectExpertReader experts(cpu.weights->store_dir + "/experts.bin",
                                       cpu.weights->manifest.experts);
    EXPECT_THROW(engine::cuda::make_cuda_model(*cpu.weights, experts, {}), Error);
}

}  // namespace
}  // namespace cherenkov::testing
