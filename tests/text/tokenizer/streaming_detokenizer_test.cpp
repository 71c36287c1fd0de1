// The streaming detokenizer never emits part of a UTF-8 character, and what it emits adds up
// to Tokenizer::decode, for every id sequence tried: the encoding of multi-byte texts, every
// window of those ids, the single-byte tokens of each text (which split every character), and
// random id sequences (seeded), on the real Qwen tokenizer.
#include "text/tokenizer/streaming_detokenizer.h"

#include <gtest/gtest.h>

#include <array>
#include <random>

#include "base/error.h"
#include "qwen_tokenizers.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

const std::vector<std::string> kTexts = {
    "日本語のテキスト、そして中文。",
    "emoji 👨‍👩‍👧‍👦 and flags 🇺🇸🇯🇵 and skin 👍🏽",
    "Ελληνικά, русский, עברית, العربية, हिन्दी, ไทย, 한국어",
    "combining e\xCC\x81 and a\xCC\x8A\xCC\x81 marks",
};

// Checks one sequence; returns the streamed text.
std::string stream_and_check(const Tokenizer& tokenizer, const std::vector<int32_t>& ids,
                             bool skip_special) {
    StreamingDetokenizer stream(tokenizer, skip_special);
    std::string streamed;
    for (const int32_t id : ids) {
        const std::string piece = stream.push(id);
        EXPECT_EQ(find_invalid_utf8(piece), kValidUtf8) << "push(" << id << ") split a character";
        streamed += piece;
    }
    const std::string tail = stream.finish();
    EXPECT_EQ(find_invalid_utf8(tail), kValidUtf8);
    streamed += tail;
    EXPECT_EQ(streamed, tokenizer.decode(ids, skip_special));
    return streamed;
}

TEST(StreamingDetokenizer, EveryWindowOfEncodedTextStreamsWholeCharacters) {
    const Tokenizer& tokenizer = testing::qwen_from_vocab_and_merges();
    for (const std::string& text : kTexts) {
        const std::vector<int32_t> ids = tokenizer.encode(text);
        EXPECT_EQ(stream_and_check(tokenizer, ids, false), tokenizer.decode(ids));
        for (size_t begin = 0; begin < ids.size(); ++begin) {
            for (size_t end = begin + 1; end <= ids.size(); ++end) {
                stream_and_check(tokenizer,
                                 std::vector<int32_t>(ids.begin() + static_cast<ptrdiff_t>(begin),
                                                      ids.begin() + static_cast<ptrdiff_t>(end)),
                                 false);
            }
        }
    }
}

TEST(StreamingDetokenizer, SingleByteTokensAreHeldUntilTheCharacterCompletes) {
    const Tokenizer& tokenizer = testing::qwen_from_vocab_and_merges();
    // The vocabulary has one token per byte (its byte-level character).
    std::array<int32_t, 256> byte_token{};
    byte_token.fill(-1);
    for (int32_t id = 0; id < static_cast<int32_t>(tokenizer.vocab_size()); ++id) {
        const std::optional<std::string_view> bytes = tokenizer.token_bytes(id);
        if (bytes && bytes->size() == 1 && byte_token[static_cast<uint8_t>((*bytes)[0])] < 0) {
            byte_token[static_cast<uint8_t>((*bytes)[0])] = id;
        }
    }
    for (const std::string& text : kTexts) {
        std::vector<int32_t> ids;
        for (const char byte : text) {
            ASSERT_GE(byte_token[static_cast<uint8_t>(byte)], 0);
            ids.push_back(byte_token[static_cast<uint8_t>(byte)]);
        }
        StreamingDetokenizer stream(tokenizer);
        std::string streamed;
        for (const int32_t id : ids) {
            const std::string piece = stream.push(id);
            EXPECT_EQ(find_invalid_utf8(piece), kValidUtf8);
            EXPECT_LE(stream.n_pending_bytes(), 3u);
            streamed += piece;
        }
        EXPECT_EQ(stream.n_pending_bytes(), 0u);
        EXPECT_EQ(streamed + stream.finish(), text);
    }
}

TEST(StreamingDetokenizer, RandomSequencesMatchDecodeWithAndWithoutSpecials) {
    const Tokenizer& tokenizer = testing::qwen_from_tokenizer_json();
    std::mt19937 random(20240601);
    std::uniform_int_distribution<int32_t> any_id(0,
                                                  static_cast<int32_t>(tokenizer.vocab_size()) - 1);
    for (int round = 0; round < 300; ++round) {
        std::vector<int32_t> ids(static_cast<size_t>(random() % 24));
        for (int32_t& id : ids) id = any_id(random);
        stream_and_check(tokenizer, ids, round % 2 == 0);
    }
}

TEST(StreamingDetokenizer, UnknownIdIsAnError) {
    StreamingDetokenizer stream(testing::qwen_from_vocab_and_merges());
    EXPECT_THROW(stream.push(-1), Error);
    EXPECT_THROW(stream.push(10'000'000), Error);
}

}  // namespace
}  // namespace cherenkov::text
