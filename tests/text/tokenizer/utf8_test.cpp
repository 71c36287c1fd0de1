// UTF-8 validation and U+FFFD replacement. The replacement expectation is the example of the
// Unicode Standard, chapter 3, Table 3-8 ("U+FFFD for Non-Shortest Form Sequences" and the
// maximal-subpart practice that Rust's from_utf8_lossy follows).
#include "text/tokenizer/utf8.h"

#include <gtest/gtest.h>

#include "text/tokenizer/byte_level.h"

namespace cherenkov::text {
namespace {

const std::string kReplacement = "\xEF\xBF\xBD";

TEST(Utf8, FindsTheFirstInvalidByte) {
    EXPECT_EQ(find_invalid_utf8("plain ascii text, long enough for the fast path"), kValidUtf8);
    EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xF0\x9F\x98\x80"), kValidUtf8);
    EXPECT_EQ(find_invalid_utf8("abc\xFF"), 3u);
    EXPECT_EQ(find_invalid_utf8("\xC0\x80"), 0u);          // overlong
    EXPECT_EQ(find_invalid_utf8("ok\xED\xA0\x80"), 2u);    // surrogate
    EXPECT_EQ(find_invalid_utf8("\xF4\x90\x80\x80"), 0u);  // above U+10FFFF
    EXPECT_EQ(find_invalid_utf8("12345678\xE2\x82"), 8u);  // truncated
}

TEST(Utf8, ReplacesMaximalSubpartsAsTheUnicodeStandardShows) {
    // Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 -> a FFFD FFFD FFFD b FFFD c FFFD FFFD d
    std::string out;
    append_utf8_lossy("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", out);
    EXPECT_EQ(out, "a" + kReplacement + kReplacement + kReplacement + "b" + kReplacement + "c" +
                       kReplacement + kReplacement + "d");
}

TEST(Utf8, HoldsBackAnIncompleteTailUntilTheFinalChunk) {
    std::string out;
    EXPECT_EQ(append_utf8_lossy("ab\xF0\x9F\x98", out, /*final_chunk=*/false), 2u);
    EXPECT_EQ(out, "ab");
    out.clear();
    EXPECT_EQ(append_utf8_lossy("ab\xF0\x9F\x98", out, /*final_chunk=*/true), 5u);
    EXPECT_EQ(out, "ab" + kReplacement);
}

TEST(ByteLevel, IsGpt2sBijectionOfBytes) {
    // openai/gpt-2 encoder.py: printable Latin-1 maps to itself, space to U+0120 ("Ġ"),
    // newline to U+010A ("Ċ").
    EXPECT_EQ(byte_level_code_point('!'), U'!');
    EXPECT_EQ(byte_level_code_point(' '), U'\u0120');
    EXPECT_EQ(byte_level_code_point('\n'), U'\u010A');
    EXPECT_EQ(byte_level_utf8(' '), "\xC4\xA0");
    for (unsigned byte = 0; byte < 256; ++byte) {
        EXPECT_EQ(byte_level_byte(byte_level_code_point(static_cast<uint8_t>(byte))), byte);
    }
    std::string decoded;
    append_byte_level_decoded("\xC4\xA0hi", decoded);
    EXPECT_EQ(decoded, " hi");
    decoded.clear();
    append_byte_level_decoded("a b", decoded);  // ' ' is outside the alphabet: raw bytes
    EXPECT_EQ(decoded, "a b");
}

}  // namespace
}  // namespace cherenkov::text
