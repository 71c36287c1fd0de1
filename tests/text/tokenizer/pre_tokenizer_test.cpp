// Split behaviours against the expectations of Hugging Face tokenizers' own unit tests
// (tokenizers/src/pre_tokenizers/split.rs: basic, regex_string, invert), plus the empty-match
// rule of its Oniguruma iteration.
#include "text/tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

namespace cherenkov::text {
namespace {

class Collect final : public PieceSink {
public:
    void piece(std::string_view text) override { pieces.emplace_back(text); }
    std::vector<std::string> pieces;
};

std::vector<std::string> split(std::vector<PreTokenizerStep> steps, std::string_view text) {
    const PreTokenizer pre_tokenizer(std::move(steps));
    PreTokenizerScratch scratch;
    Collect sink;
    pre_tokenizer.split(text, scratch, sink);
    return sink.pieces;
}

SplitStep regex_step(std::string pattern, SplitBehavior behavior, bool invert) {
    SplitStep step;
    step.pattern = std::move(pattern);
    step.behavior = behavior;
    step.invert = invert;
    step.field = "test";
    return step;
}

using Pieces = std::vector<std::string>;

TEST(PreTokenizer, SplitBehavioursMatchTokenizersTests) {
    // split.rs `basic`: the regex matches words, inverted so the delimiters are the gaps.
    const std::string words = R"(\w+|[^\w\s]+)";
    const std::string text = "How are you doing?";
    EXPECT_EQ(split({regex_step(words, SplitBehavior::Removed, true)}, text),
              (Pieces{"How", "are", "you", "doing", "?"}));
    EXPECT_EQ(split({regex_step(words, SplitBehavior::Isolated, true)}, text),
              (Pieces{"How", " ", "are", " ", "you", " ", "doing", "?"}));
    EXPECT_EQ(split({regex_step(words, SplitBehavior::MergedWithPrevious, true)}, text),
              (Pieces{"How ", "are ", "you ", "doing", "?"}));
    EXPECT_EQ(split({regex_step(words, SplitBehavior::MergedWithNext, true)}, text),
              (Pieces{"How", " are", " you", " doing", "?"}));
    EXPECT_EQ(split({regex_step(words, SplitBehavior::Contiguous, true)}, text),
              (Pieces{"How", " ", "are", " ", "you", " ", "doing?"}));
}

TEST(PreTokenizer, LiteralAndRegexSplitAgree) {
    SplitStep literal = regex_step(" ", SplitBehavior::Removed, false);
    literal.syntax = Regex::Syntax::Literal;
    EXPECT_EQ(split({literal}, "Hey, man!"),
              split({regex_step(R"(\s+)", SplitBehavior::Removed, false)}, "Hey, man!"));
}

TEST(PreTokenizer, InvertedLiteralRemovesTheGaps) {
    SplitStep spaces = regex_step(" ", SplitBehavior::Removed, false);
    spaces.syntax = Regex::Syntax::Literal;
    SplitStep hello = regex_step("Hello", SplitBehavior::Removed, true);
    hello.syntax = Regex::Syntax::Literal;
    EXPECT_EQ(split({spaces}, "Hello Hello Hello"), split({hello}, "Hello Hello Hello"));
}

TEST(PreTokenizer, EmptyMatchesSplitButLeaveNoEmptyPieces) {
    // onig's find_iter on "baab" with a*: empty at 0, "aa", empty at 4 (after "b").
    EXPECT_EQ(split({regex_step("a*", SplitBehavior::Isolated, false)}, "baab"),
              (Pieces{"b", "aa", "b"}));
}

TEST(PreTokenizer, ByteLevelMapsBytesOnlyWhenAStepFollows) {
    // A final ByteLevel leaves raw bytes for the model; a later step sees the mapped alphabet.
    const PreTokenizer deferred({ByteLevelStep{false, true}});
    EXPECT_TRUE(deferred.emits_raw_bytes());
    EXPECT_EQ(split({ByteLevelStep{false, true}}, "a b"), (Pieces{"a", " b"}));
    EXPECT_EQ(
        split({ByteLevelStep{true, true}, regex_step("x", SplitBehavior::Isolated, false)}, "a b"),
        (Pieces{"\xC4\xA0"
                "a",
                "\xC4\xA0"
                "b"}));
}

}  // namespace
}  // namespace cherenkov::text
