// Stop strings over text that arrives in pieces: the output is the text before the first match,
// whatever the split, and nothing that a later match removes is ever released.
#include "serving/stop_strings.h"

#include <gtest/gtest.h>

namespace cherenkov::serving {
namespace {

// Feeds `text` in pieces of `piece` bytes; returns the released text and whether it matched.
std::pair<std::string, bool> run(const std::vector<std::string>& stops, const std::string& text,
                                 size_t piece) {
    StopStrings s(stops);
    std::string out;
    for (size_t at = 0; at < text.size(); at += piece) {
        std::string released = s.push(text.substr(at, piece));
        // Released text never contains the start of a match that the rest completes.
        out += released;
        if (s.matched()) break;
    }
    out += s.finish();
    return {out, s.matched()};
}

TEST(StopStrings, CutBeforeTheFirstMatchForEverySplit) {
    const std::string text = "def f(x):\n    return x\n\ndef g():";
    for (size_t piece = 1; piece <= text.size(); ++piece) {
        EXPECT_EQ(run({"\n\n"}, text, piece),
                  std::make_pair(std::string("def f(x):\n    return x"), true))
            << piece;
        EXPECT_EQ(run({"return", "f("}, text, piece), std::make_pair(std::string("def "), true))
            << piece;
        EXPECT_EQ(run({"zzz"}, text, piece), std::make_pair(text, false)) << piece;
    }
}

TEST(StopStrings, HoldsBackOnlyWhatCouldStillMatch) {
    StopStrings s({"abc"});
    EXPECT_EQ(s.push("xxab"), "xx");
    EXPECT_EQ(s.push("x"), "abx");
    EXPECT_EQ(s.push("a"), "");
    EXPECT_EQ(s.push("bc tail"), "");
    EXPECT_TRUE(s.matched());
    EXPECT_EQ(s.push("more"), "");
    EXPECT_EQ(s.finish(), "");
}

TEST(StopStrings, OverlappingCandidatesAndUtf8) {
    EXPECT_EQ(run({"aab"}, "aaab", 1), std::make_pair(std::string("a"), true));
    EXPECT_EQ(run({"é!"}, "caféé!x", 1), std::make_pair(std::string("café"), true));
    EXPECT_EQ(run({"ab", "b"}, "xab", 1), std::make_pair(std::string("x"), true));
}

}  // namespace
}  // namespace cherenkov::serving
