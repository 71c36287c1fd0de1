// The pre-load context checks (engine/generate/context_budget.h): prompt + output + draft
// headroom against the context, with the caller's names in the messages; the model's position
// limit; and the memory of one sequence state against what is available.
#include "engine/generate/context_budget.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "base/file.h"
#include "engine/model/sequence_state_size.h"
#include "model_data/qwen4_exp/config.h"

namespace cherenkov::testing {
namespace {

std::string fixture_config_path() {
    return std::string(CHERENKOV_SOURCE_DIR) + "/tests/fixtures/tiny_a/hf_flat_fused/config.json";
}

model_data::qwen4_exp::Config fixture_config() {
    return model_data::qwen4_exp::parse_config(read_text_file(fixture_config_path()),
                                               fixture_config_path());
}

// The message of the Error `f` throws, checking its kind.
template <typename F>
std::string message_of(F&& f, ErrorKind kind) {
    try {
        f();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), kind) << e.what();
        return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
}

void expect_contains(const std::string& message, const std::string& part) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
}

TEST(ContextBudget, NeedsPromptOutputAndDrafts) {
    EXPECT_EQ(engine::needed_context({.prompt_tokens = 10, .max_tokens = 32, .drafts = 2}), 44);
    // A generation emits at least one token, even with max_tokens 0.
    EXPECT_EQ(engine::needed_context({.prompt_tokens = 10, .max_tokens = 0, .drafts = 0}), 11);
    EXPECT_NO_THROW(engine::check_context_budget(
        {.prompt_tokens = 10, .max_tokens = 32, .drafts = 2, .max_ctx = 44}));
}

TEST(ContextBudget, OutputThatDoesNotFitNamesEveryFigure) {
    const std::string message = message_of(
        [] {
            engine::check_context_budget(
                {.prompt_tokens = 3, .max_tokens = 32, .drafts = 2, .max_ctx = 8});
        },
        ErrorKind::InvalidInput);
    expect_contains(message, "3 tokens");
    expect_contains(message, "--max-tokens 32");
    expect_contains(message, "--drafts 2");
    expect_contains(message, "37 tokens");
    expect_contains(message, "--max-ctx 8");
    expect_contains(message, "lower --max-tokens to 3");
    expect_contains(message, "raise --max-ctx to at least 37");
}

TEST(ContextBudget, APromptThatFillsTheContextSaysSo) {
    const std::string message = message_of(
        [] {
            engine::check_context_budget(
                {.prompt_tokens = 8, .max_tokens = 1, .drafts = 0, .max_ctx = 8});
        },
        ErrorKind::InvalidInput);
    expect_contains(message, "the prompt has 8 tokens, more than --max-ctx 8 allows");
}

TEST(ContextBudget, TheServerNamesItsJsonFields) {
    engine::ContextNames names{
        .max_tokens = "max_tokens", .drafts = "speculative drafts", .max_ctx = "the context"};
    const std::string message = message_of(
        [&] {
            engine::check_context_budget(
                {.prompt_tokens = 100, .max_tokens = 4000, .drafts = 2, .max_ctx = 4096}, names);
        },
        ErrorKind::InvalidInput);
    expect_contains(message, "max_tokens 4000");
    expect_contains(message, "the context 4096");
    EXPECT_EQ(message.find("--"), std::string::npos) << message;
}

TEST(ContextBudget, ByteSizesAreDecimal) {
    EXPECT_EQ(engine::byte_size_text(512), "512 bytes");
    EXPECT_EQ(engine::byte_size_text(2'300'000'000'000), "2.3 TB");
    EXPECT_EQ(engine::byte_size_text(21'400'000'000), "21 GB");
    EXPECT_EQ(engine::byte_size_text(9'990'000), "10 MB");
}

TEST(ContextCapacity, RejectsMoreThanTheModelsPositions) {
    const auto config = fixture_config();
    ASSERT_EQ(config.max_position_embeddings, 4096);
    EXPECT_NO_THROW(engine::check_context_capacity(config, 4096, 1, 3, UINT64_MAX, "--max-ctx 4096",
                                                   "config.json"));
    const std::string message = message_of(
        [&] {
            engine::check_context_capacity(config, 4097, 1, 3, UINT64_MAX, "--max-ctx 4097",
                                           "store/config.json");
        },
        ErrorKind::InvalidInput);
    expect_contains(message, "--max-ctx 4097 is more than the model's 4096 positions");
    expect_contains(message, "store/config.json");
}

TEST(ContextCapacity, SaysHowMuchMemoryAContextNeedsAndHowMuchThereIs) {
    auto config = fixture_config();
    config.max_position_embeddings.reset();
    const int64_t ctx = 100'000'000;
    const uint64_t needed = engine::sequence_state_bytes(config, ctx, 1, 3);
    const uint64_t available = 21'000'000'000;
    ASSERT_GT(needed, available);
    EXPECT_NO_THROW(engine::check_context_capacity(config, ctx, 1, 3, needed, "--max-ctx", ""));
    const std::string message = message_of(
        [&] {
            engine::check_context_capacity(config, ctx, 1, 3, available, "--max-ctx 100000000",
                                           "config.json");
        },
        ErrorKind::ResourceExhausted);
    expect_contains(message, "--max-ctx 100000000 needs " + engine::byte_size_text(needed) +
                                 " of sequence state; this machine has 21 GB available");
    // The largest context that fits is named, and it does fit.
    const size_t at = message.find("at most ");
    ASSERT_NE(at, std::string::npos) << message;
    const int64_t most = std::stoll(message.substr(at + 8));
    EXPECT_LE(engine::sequence_state_bytes(config, most, 1, 3), available);
    EXPECT_GT(engine::sequence_state_bytes(config, most + 1, 1, 3), available);
}

TEST(ContextCapacity, AvailableMemoryIsKnown) {
    EXPECT_GT(engine::available_memory_bytes(), 0U);
}

}  // namespace
}  // namespace cherenkov::testing
