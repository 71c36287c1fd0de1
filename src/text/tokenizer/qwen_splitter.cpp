// The Qwen pre-tokenizer regexes as code. Qwen2/Qwen3 (Qwen3.5 differences in brackets):
//   A1 (?i:'s|'t|'re|'ve|'m|'ll|'d)
//   A2 [^\r\n\p{L}\p{N}]?\p{L}+            [ [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ ]
//   A3 \p{N}
//   A4  ?[^\s\p{L}\p{N}]+[\r\n]*           [ ?[^\s\p{L}\p{M}\p{N}]+[\r\n]* ]
//   A5 \s*[\r\n]+
//   A6 \s+(?!\S)
//   A7 \s+
// A backtracking engine tries the alternatives in order at each position and returns the first
// that matches; every character starts some alternative, so matches tile the text. What each
// alternative matches after backtracking:
//   A1: the apostrophe and the letters, case-insensitively (Oniguruma folds U+017F to s).
//   A2: a letter run [letter/mark run]; or one character that is not \r, \n, a letter or a
//       number, followed by that run. A Qwen3.5 mark alone is a run of its own.
//   A4: an optional space, a run of characters that are not whitespace, letters or numbers
//       [or marks], then any \r and \n.
//   A5: from a whitespace run W, everything up to and including W's last \r or \n.
//   A6: W if it ends the text, else W without its last character (needs two characters).
//   A7: W.
#include "text/tokenizer/qwen_splitter.h"

#include <utf8proc.h>

#include <array>
#include <cstdint>

#include "text/tokenizer/tokenizer_spec.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

// The Qwen3.5 regex (tokenizer_config.json pretokenize_regex of Qwen3.5 checkpoints).
constexpr std::string_view kQwen35Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Character classes as bits.
constexpr unsigned kLetter = 1;
constexpr unsigned kNumber = 2;
constexpr unsigned kMark = 4;
constexpr unsigned kSpace = 8;     // Unicode White_Space
constexpr unsigned kNewline = 16;  // \r or \n

bool is_white_space(char32_t code_point) {
    switch (code_point) {
        case 0x09:
        case 0x0A:
        case 0x0B:
        case 0x0C:
        case 0x0D:
        case 0x20:
        case 0x85:
        case 0xA0:
        case 0x1680:
        case 0x2028:
        case 0x2029:
        case 0x202F:
        case 0x205F:
        case 0x3000: return true;
        default: return code_point >= 0x2000 && code_point <= 0x200A;
    }
}

constexpr std::array<uint8_t, 128> make_ascii_classes() {
    std::array<uint8_t, 128> classes{};
    for (unsigned code = 0; code < 128; ++code) {
        uint8_t bits = 0;
        if ((code | 0x20) >= 'a' && (code | 0x20) <= 'z') bits = kLetter;
        if (code >= '0' && code <= '9') bits = kNumber;
        if ((code >= 0x09 && code <= 0x0D) || code == ' ') bits = kSpace;
        if (code == '\r' || code == '\n') bits |= kNewline;
        classes[code] = bits;
    }
    return classes;
}

constexpr std::array<uint8_t, 128> kAsciiClasses = make_ascii_classes();

unsigned classify_non_ascii(char32_t code_point) {
    if (is_white_space(code_point)) return kSpace;
    switch (utf8proc_category(static_cast<utf8proc_int32_t>(code_point))) {
        case UTF8PROC_CATEGORY_LU:
        case UTF8PROC_CATEGORY_LL:
        case UTF8PROC_CATEGORY_LT:
        case UTF8PROC_CATEGORY_LM:
        case UTF8PROC_CATEGORY_LO: return kLetter;
        case UTF8PROC_CATEGORY_ND:
        case UTF8PROC_CATEGORY_NL:
        case UTF8PROC_CATEGORY_NO: return kNumber;
        case UTF8PROC_CATEGORY_MN:
        case UTF8PROC_CATEGORY_MC:
        case UTF8PROC_CATEGORY_ME: return kMark;
        default: return 0;
    }
}

// One decoded character of the text.
struct Char {
    size_t length = 0;  // 0 past the end of the text
    char32_t code_point = 0;
    unsigned bits = 0;
};

inline Char char_at(std::string_view text, size_t offset) {
    if (offset >= text.size()) return {};
    const auto lead = static_cast<uint8_t>(text[offset]);
    if (lead < 0x80) return {1, lead, kAsciiClasses[lead]};
    const char32_t code_point = decode_utf8_at(text, offset);
    return {utf8_sequence_length(lead), code_point, classify_non_ascii(code_point)};
}

// End of the run of characters starting at `offset` whose class satisfies `in_run`.
template <typename Predicate>
inline size_t run_end(std::string_view text, size_t offset, Predicate in_run) {
    // ASCII first: one table lookup per byte.
    while (offset < text.size() && static_cast<uint8_t>(text[offset]) < 0x80) {
        if (!in_run(kAsciiClasses[static_cast<uint8_t>(text[offset])])) return offset;
        ++offset;
    }
    while (true) {
        const Char current = char_at(text, offset);
        if (current.length == 0 || !in_run(current.bits)) return offset;
        offset += current.length;
    }
}

bool folds_to(char32_t code_point, char lower) {
    if (code_point < 0x80) return (static_cast<char>(code_point) | 0x20) == lower;
    return lower == 's' && code_point == 0x17F;  // LATIN SMALL LETTER LONG S
}

// A1: the length of a contraction at `offset` (text[offset] == '\''), or 0.
size_t contraction_length(std::string_view text, size_t offset) {
    const Char first = char_at(text, offset + 1);
    if (first.length == 0) return 0;
    const size_t after_first = offset + 1 + first.length;
    if (folds_to(first.code_point, 's') || folds_to(first.code_point, 't') ||
        folds_to(first.code_point, 'm') || folds_to(first.code_point, 'd')) {
        return after_first - offset;
    }
    const Char second = char_at(text, after_first);
    if (second.length == 0) return 0;
    const bool pair = ((folds_to(first.code_point, 'r') || folds_to(first.code_point, 'v')) &&
                       folds_to(second.code_point, 'e')) ||
                      (folds_to(first.code_point, 'l') && folds_to(second.code_point, 'l'));
    return pair ? after_first + second.length - offset : 0;
}

}  // namespace

std::optional<QwenSplitter> QwenSplitter::recognize(std::string_view pattern) {
    if (pattern == kQwen2Pattern) return QwenSplitter(Variant::Qwen2);
    if (pattern == kQwen35Pattern) return QwenSplitter(Variant::Qwen35);
    return std::nullopt;
}

size_t QwenSplitter::match_length(std::string_view text, size_t offset) const {
    const Char current = char_at(text, offset);
    // Letters of A2, and for Qwen3.5 marks too.
    const unsigned word_bits = variant_ == Variant::Qwen35 ? (kLetter | kMark) : kLetter;
    // Characters of A4's run.
    const unsigned excluded_bits =
        kSpace | kLetter | kNumber | (variant_ == Variant::Qwen35 ? kMark : 0u);
    auto in_word = [&](unsigned bits) { return (bits & word_bits) != 0; };
    auto in_symbols = [&](unsigned bits) { return (bits & excluded_bits) == 0; };
    auto symbol_at = [&](size_t position) {
        const Char found = char_at(text, position);
        return found.length != 0 && in_symbols(found.bits);
    };

    if (current.code_point == '\'') {  // A1
        const size_t length = contraction_length(text, offset);
        if (length != 0) return length;
    }
    if (in_word(current.bits)) return run_end(text, offset, in_word) - offset;  // A2
    const size_t next = offset + current.length;
    if ((current.bits & (kNewline | kLetter | kNumber)) == 0 && in_word(char_at(text, next).bits)) {
        return run_end(text, next, in_word) - offset;  // A2 with its leading character
    }
    if ((current.bits & kNumber) != 0) return current.length;  // A3
    size_t symbols_start = offset;
    if (current.code_point == ' ' && symbol_at(next)) symbols_start = next;
    if (symbol_at(symbols_start)) {  // A4
        const size_t symbols_end = run_end(text, symbols_start, in_symbols);
        return run_end(text, symbols_end, [](unsigned bits) { return (bits & kNewline) != 0; }) -
               offset;
    }
    // Whitespace: A5, A6, A7 over the whitespace run [offset, space_end).
    const size_t space_end =
        run_end(text, offset, [](unsigned bits) { return (bits & kSpace) != 0; });
    for (size_t back = space_end; back > offset; --back) {  // A5: the run's last \r or \n
        const char byte = text[back - 1];
        if (byte == '\r' || byte == '\n') return back - offset;
    }
    if (space_end == text.size()) return space_end - offset;  // A6 at the end of the text
    size_t last_start = space_end - 1;
    while ((static_cast<uint8_t>(text[last_start]) & 0xC0) == 0x80) --last_start;
    if (last_start > offset) return last_start - offset;  // A6: all but the last character
    return space_end - offset;                            // A7
}

}  // namespace cherenkov::text
