// PCRE2 glue: compile options, JIT, and the fallback from the JIT's fixed stack to the
// interpreter (which keeps its backtracking state on the heap) for pathological inputs.
#include "text/tokenizer/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "base/error.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

pcre2_code* as_code(void* code) {
    return static_cast<pcre2_code*>(code);
}

// Oniguruma's Unicode classes where PCRE2's differ (measured over every code point against
// tokenizers' Oniguruma): \s is exactly White_Space (PCRE2 adds U+180E); \w is Alphabetic,
// marks, decimal digits, connector punctuation and Latin-1's superscripts and fractions.
constexpr std::string_view kOnigSpace = "\\p{White_Space}";
constexpr std::string_view kOnigNotSpace = "\\P{White_Space}";
constexpr std::string_view kOnigWordItems =
    "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
constexpr std::string_view kOnigHexItems = "0-9a-fA-F";

// Rewrites the escapes whose meaning differs between Oniguruma's Ruby syntax and PCRE2: \s \S
// \w \W \b \B \h \H. Everything else passes through unchanged. Inside a character class, \W
// and \H have no single-class equivalent and keep PCRE2's meaning.
std::string translate_oniguruma(std::string_view pattern) {
    // Built by appending: GCC 12 at -O3 warns (-Wrestrict) on "literal" + std::string(...).
    auto bracket = [](std::string_view opening, std::string_view items) {
        std::string text(opening);
        text.append(items).push_back(']');
        return text;
    };
    const std::string word = bracket("[", kOnigWordItems);
    const std::string not_word = bracket("[^", kOnigWordItems);
    const std::string hex = bracket("[", kOnigHexItems);
    const std::string not_hex = bracket("[^", kOnigHexItems);
    // \b and \B as lookarounds on the word class: (?<=w)(?!w)|(?<!w)(?=w) and its negation.
    auto boundary = [&](bool at_boundary) {
        std::string text = "(?:(?<=";
        text.append(word).append(at_boundary ? ")(?!" : ")(?=").append(word);
        text.append(")|(?<!").append(word).append(at_boundary ? ")(?=" : ")(?!").append(word);
        text.append("))");
        return text;
    };
    std::string out;
    out.reserve(pattern.size() + 32);
    bool in_class = false;
    size_t index = 0;
    while (index < pattern.size()) {
        const char current = pattern[index];
        if (current == '\\' && index + 1 < pattern.size()) {
            const char escape = pattern[index + 1];
            index += 2;
            switch (escape) {
                case 's': out += kOnigSpace; continue;
                case 'S': out += kOnigNotSpace; continue;
                case 'w': out += in_class ? std::string(kOnigWordItems) : word; continue;
                case 'W':
                    if (in_class) break;
                    out += not_word;
                    continue;
                case 'h': out += in_class ? std::string(kOnigHexItems) : hex; continue;
                case 'H':
                    if (in_class) break;
                    out += not_hex;
                    continue;
                case 'b':
                    if (in_class) break;
                    out += boundary(true);
                    continue;
                case 'B':
                    if (in_class) break;
                    out += boundary(false);
                    continue;
                default: break;
            }
            out.push_back('\\');
            out.push_back(escape);
            continue;
        }
        if (in_class && current == '[' && pattern.substr(index, 2) == "[:") {
            const size_t close = pattern.find(":]", index + 2);
            if (close != std::string_view::npos) {
                out.append(pattern.substr(index, close + 2 - index));
                index = close + 2;
                continue;
            }
        }
        if (!in_class && current == '[') {
            in_class = true;
            out.push_back(current);
            ++index;
            // A ']' right after '[' or '[^' is a literal member, not the end of the class.
            if (index < pattern.size() && pattern[index] == '^') out.push_back(pattern[index++]);
            if (index < pattern.size() && pattern[index] == ']') out.push_back(pattern[index++]);
            continue;
        }
        if (in_class && current == ']') in_class = false;
        out.push_back(current);
        ++index;
    }
    return out;
}

std::string pcre2_message(int error_code) {
    PCRE2_UCHAR buffer[256];
    const int length = pcre2_get_error_message(error_code, buffer, sizeof(buffer));
    if (length < 0) return "PCRE2 error " + std::to_string(error_code);
    return std::string(reinterpret_cast<const char*>(buffer), static_cast<size_t>(length));
}

}  // namespace

RegexScratch::RegexScratch() : match_data_(pcre2_match_data_create(1, nullptr)) {
    if (match_data_ == nullptr) throw_internal("out of memory creating PCRE2 match data");
}

RegexScratch::~RegexScratch() {
    pcre2_match_data_free(static_cast<pcre2_match_data*>(match_data_));
}

Regex::Regex(std::string_view pattern, Syntax syntax, const std::string& field)
    : pattern_(pattern) {
    if (find_invalid_utf8(pattern) != kValidUtf8) {
        throw_invalid(field + ": pattern is not valid UTF-8");
    }
    uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE;
    std::string compiled = translate_oniguruma(pattern_);
    if (syntax == Syntax::Literal) {
        options = PCRE2_UTF | PCRE2_LITERAL;
        compiled = pattern_;
    }
    pcre2_compile_context* context = pcre2_compile_context_create(nullptr);
    if (context == nullptr) throw_internal("out of memory creating a PCRE2 compile context");
    pcre2_set_newline(context, PCRE2_NEWLINE_LF);
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(compiled.data()), compiled.size(),
                                     options, &error_code, &error_offset, context);
    pcre2_compile_context_free(context);
    if (code == nullptr) {
        throw_invalid(field + ": regex '" + pattern_ +
                      "' does not compile: " + pcre2_message(error_code));
    }
    code_ = code;
    jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
}

Regex::~Regex() {
    if (code_ != nullptr) pcre2_code_free(as_code(code_));
}

Regex::Regex(Regex&& other) noexcept
    : pattern_(std::move(other.pattern_)),
      code_(std::exchange(other.code_, nullptr)),
      jit_(other.jit_) {}

Regex& Regex::operator=(Regex&& other) noexcept {
    if (this != &other) {
        if (code_ != nullptr) pcre2_code_free(as_code(code_));
        pattern_ = std::move(other.pattern_);
        code_ = std::exchange(other.code_, nullptr);
        jit_ = other.jit_;
    }
    return *this;
}

bool Regex::run(std::string_view subject, size_t start, uint32_t options, RegexScratch& scratch,
                size_t& match_begin, size_t& match_end) const {
    auto* match_data = static_cast<pcre2_match_data*>(scratch.match_data());
    // The subject was validated once by the caller; PCRE2 would otherwise re-check the whole
    // subject on every call, which is quadratic over a long text.
    options |= PCRE2_NO_UTF_CHECK;
    int rc = PCRE2_ERROR_JIT_STACKLIMIT;
    // pcre2_jit_match ignores match-time PCRE2_ANCHORED, so anchored matches use pcre2_match.
    if (jit_ && (options & PCRE2_ANCHORED) == 0) {
        rc = pcre2_jit_match(as_code(code_), reinterpret_cast<PCRE2_SPTR>(subject.data()),
                             subject.size(), start, options, match_data, nullptr);
    }
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(as_code(code_), reinterpret_cast<PCRE2_SPTR>(subject.data()),
                         subject.size(), start, options | PCRE2_NO_JIT, match_data, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
        throw Error(ErrorKind::ResourceExhausted, "regex '" + pattern_ + "' failed at byte " +
                                                      std::to_string(start) + ": " +
                                                      pcre2_message(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
    match_begin = ovector[0];
    match_end = ovector[1];
    // \K can move a match's start past its end; treat that as an empty match at the end.
    if (match_begin > match_end) match_begin = match_end;
    return true;
}

bool Regex::find(std::string_view subject, size_t start, RegexScratch& scratch, size_t& match_begin,
                 size_t& match_end) const {
    return run(subject, start, 0, scratch, match_begin, match_end);
}

bool Regex::matches_at(std::string_view subject, size_t offset, RegexScratch& scratch,
                       size_t& match_end) const {
    size_t match_begin = 0;
    return run(subject, offset, PCRE2_ANCHORED, scratch, match_begin, match_end);
}

size_t Regex::next_char_length(std::string_view subject, size_t offset) {
    if (offset >= subject.size()) return 1;
    return utf8_sequence_length(static_cast<uint8_t>(subject[offset]));
}

}  // namespace cherenkov::text
