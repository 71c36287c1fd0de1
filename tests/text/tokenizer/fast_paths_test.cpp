// The two fast paths agree with the general code they stand in for, on seeded random strings:
// the hand-written Qwen pre-tokenizer matcher against PCRE2 running the same regex, and the
// normalizer's cut-at-boundaries normalization against utf8proc_map on the whole string.
// Characters come from pools that exercise every alternative and every normalization case,
// without code points whose Unicode tables differ between the libraries' versions.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <cstdlib>
#include <memory>
#include <random>

#include "text/tokenizer/normalizer.h"
#include "text/tokenizer/pre_tokenizer.h"
#include "text/tokenizer/tokenizer_spec.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

constexpr std::string_view kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string random_text(std::mt19937& random, const std::vector<char32_t>& pool, size_t max_chars) {
    std::string text;
    const size_t n_chars = 1 + random() % max_chars;
    for (size_t index = 0; index < n_chars; ++index)
        append_utf8(pool[random() % pool.size()], text);
    return text;
}

class Collect final : public PieceSink {
public:
    void piece(std::string_view text) override { pieces.emplace_back(text); }
    std::vector<std::string> pieces;
};

std::vector<std::string> split_with(const PreTokenizer& pre_tokenizer, std::string_view text) {
    PreTokenizerScratch scratch;
    Collect sink;
    pre_tokenizer.split(text, scratch, sink);
    return sink.pieces;
}

PreTokenizer splitter(std::string pattern) {
    SplitStep step;
    step.pattern = std::move(pattern);
    step.field = "test";
    return PreTokenizer({step});
}

TEST(QwenSplitter, MatchesPcre2OnRandomText) {
    const std::vector<char32_t> pool = {
        'a',    'b',     's',    't',    'r',    'e',    'v',    'm',  'l',   'd',
        'S',    'T',     'R',    'E',    'L',    'D',    'x',    'Z',  '0',   '7',
        '\'',   '\'',    '!',    '?',    '.',    '-',    '_',    '(',  ' ',   ' ',
        ' ',    '\t',    '\r',   '\n',   '\n',   0x0B,   0x0C,   0x85, 0xA0,  0x1680,
        0x2003, 0x2028,  0x2029, 0x3000, 0x180E, 0x200B, 0x200D, 0xE9, 0x17F, 0x3B1,
        0x416,  0x4E2D,  0xAC00, 0x5D0,  0x627,  0x905,  0xE01,  // letters
        0x301,  0x93F,   0x20DD, 0x5B0,                          // marks
        0xB2,   0xBD,    0x216B, 0x663,  0x966,                  // numbers
        0x20AC, 0x1F600, 0x2014, 0xFF01, 0x3002,                 // other
    };
    const PreTokenizer fast_qwen2 = splitter(kQwen2Pattern);
    const PreTokenizer pcre_qwen2 = splitter(std::string("(?:") + kQwen2Pattern + ")");
    const PreTokenizer fast_qwen35 = splitter(std::string(kQwen35Pattern));
    const PreTokenizer pcre_qwen35 = splitter("(?:" + std::string(kQwen35Pattern) + ")");
    std::mt19937 random(7);
    for (int round = 0; round < 20000; ++round) {
        const std::string text = random_text(random, pool, 16);
        ASSERT_EQ(split_with(fast_qwen2, text), split_with(pcre_qwen2, text)) << "'" << text << "'";
        ASSERT_EQ(split_with(fast_qwen35, text), split_with(pcre_qwen35, text))
            << "'" << text << "'";
    }
}

std::string utf8proc_normalized(std::string_view text, UnicodeForm form) {
    int options = UTF8PROC_STABLE;
    switch (form) {
        case UnicodeForm::Nfc: options |= UTF8PROC_COMPOSE; break;
        case UnicodeForm::Nfd: options |= UTF8PROC_DECOMPOSE; break;
        case UnicodeForm::Nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
        case UnicodeForm::Nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* result = nullptr;
    const utf8proc_ssize_t length =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                     static_cast<utf8proc_ssize_t>(text.size()), &result,
                     static_cast<utf8proc_option_t>(options));
    EXPECT_GE(length, 0);
    std::string out(reinterpret_cast<const char*>(result),
                    static_cast<size_t>(std::max<utf8proc_ssize_t>(length, 0)));
    std::free(result);
    return out;
}

TEST(Normalizer, BoundaryCutsAgreeWithWholeStringNormalization) {
    const std::vector<char32_t> pool = {
        'a',    'e',     'o',    'A',    ' ',    '1',
        0xE9,   0xC5,    0x1E69, 0x212B, 0x2126,  // precomposed, singletons
        0x300,  0x301,   0x316,  0x334,  0x345,  0x5B0,
        0x344,  0x308,   0x323,                            // marks of many classes
        0x1100, 0x1161,  0x11A8, 0xAC00, 0xAC01, 0xD7A3,   // Hangul
        0xFB01, 0xB2,    0xFF46, 0x338F, 0xF900, 0x2FA1D,  // compatibility, CJK
        0x304B, 0x3099,  0x309A, 0x30AB, 0xB47,  0xB3E,
        0xB57,  0xDD9,   0xDCF,  0xDCA,  // kana, Indic
        0x4E2D, 0x1F600,
    };
    std::mt19937 random(11);
    for (const UnicodeForm form :
         {UnicodeForm::Nfc, UnicodeForm::Nfd, UnicodeForm::Nfkc, UnicodeForm::Nfkd}) {
        const Normalizer normalizer({form});
        for (int round = 0; round < 20000; ++round) {
            const std::string text = random_text(random, pool, 12);
            std::string buffer;
            ASSERT_EQ(normalizer.normalize(text, buffer), utf8proc_normalized(text, form))
                << "form " << static_cast<int>(form) << " text '" << text << "'";
        }
    }
}

}  // namespace
}  // namespace cherenkov::text
