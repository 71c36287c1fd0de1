// Generation: greedy output identical for every draft count (speculation with rollback on the
// tiny_a fixture, which has an MTP head), equal to the reference's greedy continuation, seeded
// sampling reproducible, and context limits checked before any work.
#include "engine/generate/generator.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "engine/model/delegating_backend.h"
#include "engine/model/fixture_engine.h"

namespace cherenkov::testing {
namespace {

std::vector<int32_t> generate(FixtureEngine& engine, const std::vector<int32_t>& prompt,
                              const engine::GenerationOptions& options,
                              engine::GenerationStats* stats = nullptr) {
    return generate_tokens(engine.model, prompt, options, stats);
}

TEST(Generator, GreedyOutputIsTheSameForEveryDraftCount) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.len33");
    const auto expected = reference.tokens("greedy.len33.ids");
    engine::GenerationOptions options;
    options.max_tokens = 80;
    options.stop_at_eos = false;
    options.max_ctx = 256;
    std::vector<std::vector<int32_t>> outputs;
    for (int drafts = 0; drafts <= 2; ++drafts) {
        options.drafts = drafts;
        engine::GenerationStats stats;
        outputs.push_back(generate(engine, prompt, options, &stats));
        EXPECT_EQ(stats.generated_tokens, 80);
        EXPECT_EQ(stats.stop_reason, "length");
        EXPECT_EQ(stats.speculation, drafts > 0);
        if (drafts > 0) {
            EXPECT_GT(stats.drafts_proposed[0], 0);
        }
        if (drafts == 2)
            std::printf("drafts 2: proposed %lld/%lld accepted %lld/%lld\n",
                        static_cast<long long>(stats.drafts_proposed[0]),
                        static_cast<long long>(stats.drafts_proposed[1]),
                        static_cast<long long>(stats.drafts_accepted[0]),
                        static_cast<long long>(stats.drafts_accepted[1]));
    }
    EXPECT_EQ(outputs[1], outputs[0]);
    EXPECT_EQ(outputs[2], outputs[0]);
    ASSERT_GE(outputs[0].size(), expected.size());
    EXPECT_EQ(std::vector<int32_t>(outputs[0].begin(),
                                   outputs[0].begin() + static_cast<int64_t>(expected.size())),
              expected);
}

// Drafts forced right or wrong by a pattern: full acceptance (so second drafts are chained),
// partial acceptance and rejection all give the plain greedy output.
TEST(Generator, ForcedAcceptanceAndRejectionKeepGreedyOutput) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.chat");
    engine::GenerationOptions options;
    options.max_tokens = 60;
    options.stop_at_eos = false;
    options.drafts = 0;
    const auto plain = generate(engine, prompt, options);
    options.drafts = 2;
    options.draft_override = [&](int64_t index, int j, int32_t) {
        // Right for most indices, wrong every 7th (index) and for second drafts every 5th.
        const bool wrong = index % 7 == 3 || (j == 1 && index % 5 == 0);
        const int32_t truth = plain[static_cast<size_t>(std::min<int64_t>(index, 59))];
        return wrong ? (truth + 1) % 512 : truth;
    };
    engine::GenerationStats stats;
    const auto speculative = generate(engine, prompt, options, &stats);
    EXPECT_EQ(speculative, plain);
    EXPECT_GT(stats.drafts_accepted[0], 10);
    EXPECT_GT(stats.drafts_proposed[1], 5);
    EXPECT_GT(stats.drafts_accepted[1], 2);
    EXPECT_LT(stats.drafts_accepted[0], stats.drafts_proposed[0]);
    EXPECT_LT(stats.decode_steps, 50);
}

TEST(Generator, StopsAtEosAndAtTheTokenLimit) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    ReferenceFile reference("tiny_c/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.len33");
    engine::GenerationOptions options;
    options.max_tokens = 5;
    engine::GenerationStats stats;
    const auto first = generate(engine, prompt, options, &stats);
    ASSERT_EQ(first.size(), 5U);
    EXPECT_EQ(stats.stop_reason, "length");
    // Make the second greedy token an EOS: generation stops right after emitting it.
    options.eos_ids = {first[1]};
    const auto stopped = generate(engine, prompt, options, &stats);
    EXPECT_EQ(stats.stop_reason, "eos");
    EXPECT_EQ(stopped.back(), first[1]);
    EXPECT_LE(stopped.size(), 2U);
}

// tiny_b's config asks for an MTP layer but the checkpoint has no MTP weights: the store
// disables MTP and generation runs without drafts.
TEST(Generator, StoreWithoutMtpWeightsDisablesDrafting) {
    FixtureEngine engine("tiny_b/hf_nested_experts_sharded");
    EXPECT_FALSE(engine.model.has_mtp());
    ReferenceFile reference("tiny_b/reference/logits.safetensors");
    engine::GenerationOptions options;
    options.max_tokens = 8;
    options.drafts = 2;
    engine::GenerationStats stats;
    const auto out = generate(engine, reference.tokens("input_ids.len33"), options, &stats);
    EXPECT_FALSE(stats.speculation);
    EXPECT_EQ(stats.drafts_proposed[0], 0);
    const std::vector<int32_t> expected = reference.tokens("greedy.len33.ids");
    ASSERT_GE(expected.size(), 8U);
    EXPECT_EQ(out, std::vector<int32_t>(expected.begin(), expected.begin() + 8));
}

TEST(Generator, SeededSamplingIsReproducible) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.len8");
    engine::GenerationOptions options;
    options.max_tokens = 24;
    options.stop_at_eos = false;
    options.sampling.temperature = 1.0F;
    options.sampling.top_p = 0.9F;
    options.sampling.seed = 7;
    engine::GenerationStats stats;
    const auto a = generate(engine, prompt, options, &stats);
    EXPECT_FALSE(stats.speculation);  // sampling disables MTP verification
    const auto b = generate(engine, prompt, options);
    EXPECT_EQ(a, b);
    options.sampling.seed = 8;
    EXPECT_NE(generate(engine, prompt, options), a);
}

// Delegates to a backend and counts the logits and token ids that cross back to the generator.
class CountingBackend final : public DelegatingBackend {
public:
    using DelegatingBackend::DelegatingBackend;

    engine::ForwardResult forward(engine::SequenceState& state, std::span<const int32_t> tokens,
                                  const engine::ForwardOptions& options) override {
        return count(inner_.forward(state, tokens, options));
    }
    engine::MtpResult mtp_catch_up(engine::SequenceState& state, int32_t next_token,
                                   bool all_logits, engine::ForwardTrace* trace,
                                   const engine::TokenSelection* select) override {
        return count(inner_.mtp_catch_up(state, next_token, all_logits, trace, select));
    }
    engine::MtpResult mtp_chain(engine::SequenceState& state, int32_t token, int64_t position,
                                int64_t step, const engine::TokenSelection* select) override {
        return count(inner_.mtp_chain(state, token, position, step, select));
    }

    int64_t logit_floats = 0;
    int64_t token_ids = 0;

private:
    template <typename Result>
    Result count(Result result) {
        logit_floats += static_cast<int64_t>(result.logits.size());
        token_ids += static_cast<int64_t>(result.tokens.size());
        return result;
    }
};

// Greedy decoding with the backend picking tokens returns no logits at all (prefill, decode,
// verification and drafts), and emits exactly what picking from host logits emits, for every
// draft count; so do sampled runs with top-k and top-p at a fixed seed.
TEST(Generator, BackendSelectionEqualsTheHostLogitsPath) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto prompt = reference.tokens("input_ids.chat");
    engine::GenerationOptions options;
    options.max_tokens = 40;
    options.stop_at_eos = false;
    options.prefill_quantum = engine::PrefillQuantum::of(8);  // several prefill chunks
    for (int drafts = 0; drafts <= 2; ++drafts) {
        options.drafts = drafts;
        CountingBackend selecting(engine.model);
        options.host_selection = false;
        engine::GenerationStats on_backend;
        const auto a = generate_tokens(selecting, prompt, options, &on_backend);
        EXPECT_EQ(selecting.logit_floats, 0) << "drafts " << drafts;
        EXPECT_GT(selecting.token_ids, 40);
        CountingBackend host(engine.model);
        options.host_selection = true;
        engine::GenerationStats on_host;
        const auto b = generate_tokens(host, prompt, options, &on_host);
        EXPECT_GT(host.logit_floats, 0);
        EXPECT_EQ(host.token_ids, 0);
        EXPECT_EQ(a, b) << "drafts " << drafts;
        EXPECT_EQ(on_backend.drafts_accepted, on_host.drafts_accepted) << "drafts " << drafts;
        EXPECT_EQ(on_backend.decode_steps, on_host.decode_steps) << "drafts " << drafts;
    }

    options.drafts = 2;  // sampling turns speculation off
    options.sampling.temperature = 0.8F;
    options.sampling.top_k = 40;
    options.sampling.top_p = 0.9F;
    options.sampling.seed = 5;
    options.host_selection = false;
    const auto sampled = generate_tokens(engine.model, prompt, options);
    options.host_selection = true;
    EXPECT_EQ(generate_tokens(engine.model, prompt, options), sampled);

    // Penalties keep the logits path (they need the host's token counts).
    options.host_selection = false;
    options.sampling.presence_penalty = 0.5F;
    CountingBackend penalised(engine.model);
    generate_tokens(penalised, prompt, options);
    EXPECT_GT(penalised.logit_floats, 0);
}

// The CPU model answers a selection with ids from the shared definition, keeps the logits only
// when asked, and rejects a wrong number of choices before touching the state.
TEST(Generator, CpuModelAnswersATokenSelection) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const auto tokens = reference.tokens("input_ids.len8");
    const int64_t vocab = engine.model.vocab_size();
    engine::SequenceState plain_state = engine.model.new_sequence(64);
    engine::ForwardOptions all;
    all.all_logits = true;
    const std::vector<float> logits = engine.model.forward(plain_state, tokens, all).logits;

    engine::TokenSelection selection;
    selection.rows.assign(tokens.size(), engine::TokenChoice{});
    selection.rows[3] = engine::TokenChoice{1.0F, 20, 0.9F, 0.37};
    selection.keep_logits = true;
    all.select = &selection;
    engine::SequenceState state = engine.model.new_sequence(64);
    const engine::ForwardResult kept = engine.model.forward(state, tokens, all);
    EXPECT_EQ(kept.logits, logits);
    ASSERT_EQ(kept.tokens.size(), tokens.size());
    engine::TokenSelector selector;
    for (size_t row = 0; row < tokens.size(); ++row) {
        const auto row_logits = std::span<const float>(logits).subspan(
            row * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
        EXPECT_EQ(kept.tokens[row], selector.select(row_logits, selection.rows[row])) << row;
    }

    selection.keep_logits = false;
    engine::SequenceState fresh = engine.model.new_sequence(64);
    const engine::ForwardResult ids = engine.model.forward(fresh, tokens, all);
    EXPECT_TRUE(ids.logits.empty());
    EXPECT_EQ(ids.tokens, kept.tokens);

    selection.rows.pop_back();
    engine::SequenceState untouched = engine.model.new_sequence(64);
    EXPECT_THROW(engine.model.forward(untouched, tokens, all), cherenkov::Error);
    EXPECT_EQ(untouched.position, 0);
}

// The stepwise interface the server's worker uses: any prefill chunk size, and steps of two
// generations interleaved on one thread (each with its own state), give each the tokens it gets
// alone; with token_logits each emitted token comes with the row that chose it.
TEST(Generator, StepsInAnyChunkingAndInterleavedGiveTheSoloTokens) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompts[2] = {reference.tokens("input_ids.len33"),
                                             reference.tokens("input_ids.chat")};
    engine::GenerationOptions options;
    options.max_tokens = 40;
    options.stop_at_eos = false;
    options.max_ctx = 256;
    options.drafts = 2;
    std::vector<int32_t> solo[2];
    for (int i = 0; i < 2; ++i) solo[i] = generate(engine, prompts[i], options);

    options.token_logits = true;
    engine::Generator generators[2] = {engine::Generator(engine.model, options),
                                       engine::Generator(engine.model, options)};
    std::vector<int32_t> out[2];
    const auto vocab = static_cast<size_t>(engine.model.vocab_size());
    for (int i = 0; i < 2; ++i) generators[i].start(prompts[i]);
    bool running[2] = {true, true};
    while (running[0] || running[1]) {
        for (int i = 0; i < 2; ++i) {
            if (!running[i]) continue;
            running[i] = generators[i].step(
                [&](const engine::EmittedToken& t) {
                    EXPECT_EQ(t.logits.size(), vocab);
                    EXPECT_EQ(engine::argmax(t.logits), t.token);
                    out[i].push_back(t.token);
                    return true;
                },
                /*prefill_rows=*/5 + i);
        }
    }
    for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(out[i], solo[i]) << "prompt " << i;
        EXPECT_GT(generators[i].stats().prefill_chunks, 1);
        EXPECT_EQ(generators[i].stats().stop_reason, "length");
    }
}

TEST(Generator, RejectsPromptsThatDoNotFitBeforeWork) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    engine::GenerationOptions options;
    options.max_ctx = 4;
    engine::Generator generator(engine.model, options);
    const std::vector<int32_t> prompt = {1, 2, 3, 4};
    EXPECT_THROW(generator.generate(prompt, [](int32_t) { return true; }), cherenkov::Error);
    EXPECT_THROW(generator.generate({}, [](int32_t) { return true; }), cherenkov::Error);
    options.drafts = 3;
    EXPECT_THROW(engine::Generator(engine.model, options), cherenkov::Error);
}

TEST(DraftPolicy, ChainsASecondDraftOnlyAfterFullAcceptanceAndBacksOff) {
    engine::DraftPolicy policy(2);
    EXPECT_EQ(policy.next(), 1);
    policy.record(1, 1);
    EXPECT_EQ(policy.next(), 2);
    policy.record(2, 1);
    EXPECT_EQ(policy.next(), 1);
    for (int i = 0; i < 8; ++i) policy.record(1, 0);
    EXPECT_EQ(policy.next(), 0);  // cooling down after poor acceptance
    int plain = 1;
    while (policy.next() == 0) ++plain;
    EXPECT_EQ(plain, 16);
}

}  // namespace
}  // namespace cherenkov::testing
