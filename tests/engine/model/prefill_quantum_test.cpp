// The prefill quantum (engine/model/prefill_quantum.h): range checks naming --prefill-quantum or
// the configuration key the value came from, chunked forward calls equal to one call, greedy
// generation identical for quanta 1, 7 and 256 (with and without MTP drafts, whose pending
// residuals span chunks), and chunks cut further to a backend's max_rows_per_call (also through
// --check's wrapper).
#include "engine/model/prefill_quantum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/model/delegating_backend.h"
#include "engine/model/fixture_engine.h"
#include "engine/runtime/checked_backend.h"

namespace cherenkov::testing {
namespace {

// A backend that forwards to `inner` but says it takes at most `limit` rows per call, and
// records the largest call it was given (so a test sees that callers obey the limit).
class RowLimitedBackend final : public DelegatingBackend {
public:
    RowLimitedBackend(engine::ModelBackend& inner, int64_t limit)
        : DelegatingBackend(inner), limit_(limit) {}

    engine::ForwardResult forward(engine::SequenceState& state, std::span<const int32_t> tokens,
                                  const engine::ForwardOptions& options) override {
        largest_call = std::max(largest_call, static_cast<int64_t>(tokens.size()));
        return inner_.forward(state, tokens, options);
    }
    int64_t max_rows_per_call() const override { return limit_; }

    int64_t largest_call = 0;

private:
    int64_t limit_;
};

// `source` null: made as the CLI makes it, whose messages name --prefill-quantum.
void expect_rejected(int64_t quantum, const char* source = nullptr) {
    try {
        if (source == nullptr) {
            engine::PrefillQuantum::of(quantum);
        } else {
            engine::PrefillQuantum::of(quantum, source);
        }
        FAIL() << "accepted " << quantum;
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        const std::string message = e.what();
        const std::string named = source == nullptr ? "--prefill-quantum" : source;
        EXPECT_EQ(message.rfind(named + " must be between 1 and 65536", 0), 0U) << message;
        EXPECT_NE(message.find("got " + std::to_string(quantum)), std::string::npos) << message;
    }
}

TEST(PrefillQuantum, AcceptsOneTo65536AndNamesTheFlagOtherwise) {
    for (const int64_t good :
         {int64_t{1}, int64_t{7}, engine::kDefaultPrefillQuantum, engine::kMaxPrefillQuantum}) {
        EXPECT_EQ(engine::PrefillQuantum::of(good).rows(), good);
    }
    for (const int64_t bad : {int64_t{0}, int64_t{-1}, engine::kMaxPrefillQuantum + 1,
                              std::numeric_limits<int64_t>::min()}) {
        expect_rejected(bad);
    }
}

// A value from the server's configuration file names its key, not the flag.
TEST(PrefillQuantum, MessagesNameWhereTheValueCameFrom) {
    expect_rejected(0, "limits.prefill_quantum");
    expect_rejected(engine::kMaxPrefillQuantum + 1, "limits.prefill_quantum");
    EXPECT_EQ(engine::PrefillQuantum::of(12, "limits.prefill_quantum").rows(), 12);
}

// A quantum nobody set is the default, 512 rows and automatic; a quantum given is fixed, even at
// 512; equal quanta compare equal.
TEST(PrefillQuantum, DefaultsTo512AutomaticAndComparesByRows) {
    EXPECT_EQ(engine::PrefillQuantum().rows(), engine::kDefaultPrefillQuantum);
    EXPECT_TRUE(engine::PrefillQuantum().automatic());
    EXPECT_FALSE(engine::PrefillQuantum::of(512).automatic());
    EXPECT_NE(engine::PrefillQuantum(), engine::PrefillQuantum::of(512));
    EXPECT_EQ(engine::PrefillQuantum::of(512), engine::PrefillQuantum::of(512));
    EXPECT_NE(engine::PrefillQuantum::of(3), engine::PrefillQuantum::of(4));
    EXPECT_EQ(engine::GenerationOptions{}.prefill_quantum, engine::PrefillQuantum());
}

TEST(PrefillQuantum, GeneratorRejectsABadQuantumBeforeWork) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    engine::GenerationOptions options;
    try {
        // A quantum out of range cannot be made, so no generator runs with one.
        options.prefill_quantum = engine::PrefillQuantum::of(0);
        engine::Generator generator(engine.model, options);
        FAIL() << "accepted --prefill-quantum 0";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--prefill-quantum"), std::string::npos) << e.what();
    }
}

TEST(PrefillQuantum, ChunkRowsAreTheQuantumCutToTheBackendsLimit) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    EXPECT_EQ(engine.model.max_rows_per_call(), std::numeric_limits<int64_t>::max());
    EXPECT_EQ(engine::prefill_chunk_rows(engine.model, engine::PrefillQuantum::of(256)), 256);
    RowLimitedBackend limited(engine.model, 5);
    EXPECT_EQ(engine::prefill_chunk_rows(limited, engine::PrefillQuantum::of(256)), 5);
    EXPECT_EQ(engine::prefill_chunk_rows(limited, engine::PrefillQuantum::of(3)), 3);
    EXPECT_THROW(engine::prefill_chunk_rows(limited, engine::PrefillQuantum::of(0)), Error);
}

// An automatic quantum's chunks are the backend's reservation where it makes one (larger or
// smaller than 512 rows), else the quantum's 512 rows.
TEST(PrefillQuantum, AutomaticChunksAreTheBackendsReservation) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    EXPECT_EQ(engine::prefill_chunk_rows(engine.model, engine::PrefillQuantum()),
              engine::kDefaultPrefillQuantum);
    RowLimitedBackend grown(engine.model, 4096);
    EXPECT_EQ(engine::prefill_chunk_rows(grown, engine::PrefillQuantum()), 4096);
    EXPECT_EQ(engine::prefill_chunk_rows(grown, engine::PrefillQuantum::of(512)), 512);
    RowLimitedBackend shrunk(engine.model, 100);
    EXPECT_EQ(engine::prefill_chunk_rows(shrunk, engine::PrefillQuantum()), 100);
}

TEST(PrefillQuantum, ChunkedCallsEqualOneCall) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> tokens = reference.tokens("input_ids.len33");
    engine::ForwardOptions all;
    all.all_logits = true;
    engine::SequenceState whole_state = engine.model.new_sequence(64);
    const std::vector<float> whole = engine.model.forward(whole_state, tokens, all).logits;
    const int64_t vocab = engine.model.vocab_size();
    for (const int64_t quantum : {int64_t{1}, int64_t{7}, int64_t{256}}) {
        engine::SequenceState state = engine.model.new_sequence(64);
        int64_t calls = 0;
        const engine::ForwardResult chunked =
            engine::forward_in_chunks(engine.model, state, tokens, all, quantum, &calls);
        EXPECT_EQ(calls, (33 + quantum - 1) / quantum) << quantum;
        EXPECT_EQ(chunked.n_logit_rows, 33) << quantum;
        EXPECT_EQ(state.position, 33) << quantum;
        EXPECT_LE(max_abs_diff(chunked.logits, whole), 1e-4F) << quantum;

        // Without all_logits: the last row's logits only.
        engine::SequenceState last_state = engine.model.new_sequence(64);
        const engine::ForwardResult last = engine::forward_in_chunks(
            engine.model, last_state, tokens, engine::ForwardOptions{}, quantum);
        EXPECT_EQ(last.n_logit_rows, 1) << quantum;
        const std::vector<float> whole_last(whole.end() - vocab, whole.end());
        EXPECT_LE(max_abs_diff(last.logits, whole_last), 1e-4F) << quantum;
    }
}

TEST(PrefillQuantum, SnapshotsAcrossChunksAreRefused) {
    FixtureEngine engine("tiny_c/hf_nested_fused");
    engine::SequenceState state = engine.model.new_sequence(64);
    engine::ForwardOptions snap;
    snap.snapshot_rows = true;
    const std::vector<int32_t> tokens = {1, 2, 3, 4};
    EXPECT_THROW(engine::forward_in_chunks(engine.model, state, tokens, snap, 3), Error);
}

// Greedy text is the same whatever the quantum, with drafts off and on (MTP catch-up consumes
// the residuals every prefill chunk appended).
TEST(PrefillQuantum, GreedyTextIsTheSameForQuanta1And7And256) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.len33");
    const std::vector<int32_t> expected = reference.tokens("greedy.len33.ids");
    for (const int drafts : {0, 2}) {
        engine::GenerationOptions options;
        options.max_tokens = 24;
        options.stop_at_eos = false;
        options.max_ctx = 128;
        options.drafts = drafts;
        std::vector<std::vector<int32_t>> outputs;
        for (const int64_t quantum : {int64_t{1}, int64_t{7}, int64_t{256}}) {
            options.prefill_quantum = engine::PrefillQuantum::of(quantum);
            engine::GenerationStats stats;
            outputs.push_back(generate_tokens(engine.model, prompt, options, &stats));
            EXPECT_EQ(stats.prefill_chunk_tokens, quantum);
            EXPECT_EQ(stats.prefill_chunks, (33 + quantum - 1) / quantum);
        }
        EXPECT_EQ(outputs[1], outputs[0]) << "drafts " << drafts;
        EXPECT_EQ(outputs[2], outputs[0]) << "drafts " << drafts;
        const size_t n = std::min(expected.size(), outputs[0].size());
        EXPECT_EQ(std::vector<int32_t>(outputs[0].begin(), outputs[0].begin() + n),
                  std::vector<int32_t>(expected.begin(), expected.begin() + n));
    }
}

// A backend that holds fewer rows than the quantum gets smaller chunks, and the text is unchanged.
TEST(PrefillQuantum, ChunksShrinkToTheBackendsLimit) {
    FixtureEngine engine("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.len33");
    engine::GenerationOptions options;
    options.max_tokens = 16;
    options.stop_at_eos = false;
    options.max_ctx = 128;
    options.drafts = 2;
    const std::vector<int32_t> expected = generate_tokens(engine.model, prompt, options);

    RowLimitedBackend limited(engine.model, 5);
    engine::GenerationStats stats;
    EXPECT_EQ(generate_tokens(limited, prompt, options, &stats), expected);
    EXPECT_EQ(stats.prefill_chunk_tokens, 5);
    EXPECT_EQ(stats.prefill_chunks, 7);
    EXPECT_EQ(limited.largest_call, 5);

    // --check's wrapper reports the limit of the backend under test.
    std::unique_ptr<engine::ModelBackend> checked =
        engine::make_checked_backend(limited, engine.model);
    EXPECT_EQ(checked->max_rows_per_call(), 5);
}

}  // namespace
}  // namespace cherenkov::testing
