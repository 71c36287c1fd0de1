// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that iterates matches
// the way Hugging Face tokenizers' Oniguruma binding does, so pre-tokenizer splits agree.
// Patterns use Oniguruma's Ruby syntax in tokenizer.json. PCRE2 reads most of it identically
// (classes, \p{..}, (?i:..), lookaround); \s \S \w \W \b \B \h \H are rewritten to Oniguruma's
// classes, and `^`/`$` are line anchors as in Ruby (PCRE2_MULTILINE). Not translated: Ruby's (?m)
// (dot-all there), nested classes, and \W or \H inside a class. Unicode tables are the linked
// PCRE2's (Unicode 14 for 10.42): characters assigned later are unclassified.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace cherenkov::text {

// One part of a subject: either a match of the pattern or the text between matches.
struct MatchSegment {
    size_t begin = 0;
    size_t end = 0;
    bool is_match = false;
};

// Per-call matching state (PCRE2 match data); one per thread, reused across calls.
class RegexScratch {
public:
    RegexScratch();
    ~RegexScratch();
    RegexScratch(const RegexScratch&) = delete;
    RegexScratch& operator=(const RegexScratch&) = delete;

    void* match_data() const { return match_data_; }

private:
    void* match_data_;
};

class Regex {
public:
    enum class Syntax { Pattern, Literal };

    // Throws InvalidInput naming `field` when the pattern does not compile.
    Regex(std::string_view pattern, Syntax syntax, const std::string& field);
    ~Regex();
    Regex(Regex&& other) noexcept;
    Regex& operator=(Regex&& other) noexcept;
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Calls `sink(MatchSegment)` for consecutive segments covering all of `subject` (valid
    // UTF-8): non-matching gaps and matches in order, like tokenizers' `find_matches`. An empty
    // match right where the previous match ended is skipped (onig's FindMatches). An empty
    // subject yields one empty non-match.
    template <typename Sink>
    void for_each_segment(std::string_view subject, RegexScratch& scratch, Sink&& sink) const {
        if (subject.empty()) {
            sink(MatchSegment{0, 0, false});
            return;
        }
        size_t search_from = 0;
        size_t previous_end = 0;
        bool have_match = false;
        size_t last_match_end = 0;
        size_t match_begin = 0;
        size_t match_end = 0;
        while (search_from <= subject.size()) {
            if (!find(subject, search_from, scratch, match_begin, match_end)) break;
            if (match_begin == match_end && have_match && last_match_end == match_end) {
                search_from += next_char_length(subject, search_from);
                continue;
            }
            search_from = match_end;
            have_match = true;
            last_match_end = match_end;
            if (previous_end != match_begin) sink(MatchSegment{previous_end, match_begin, false});
            sink(MatchSegment{match_begin, match_end, true});
            previous_end = match_end;
        }
        if (previous_end != subject.size()) {
            sink(MatchSegment{previous_end, subject.size(), false});
        }
    }

    // Whether the pattern matches at exactly `offset` (anchored there).
    bool matches_at(std::string_view subject, size_t offset, RegexScratch& scratch,
                    size_t& match_end) const;

    const std::string& pattern() const { return pattern_; }

private:
    // First match at or after `start`; false when there is none.
    bool find(std::string_view subject, size_t start, RegexScratch& scratch, size_t& match_begin,
              size_t& match_end) const;
    bool run(std::string_view subject, size_t start, uint32_t options, RegexScratch& scratch,
             size_t& match_begin, size_t& match_end) const;
    static size_t next_char_length(std::string_view subject, size_t offset);

    std::string pattern_;
    void* code_ = nullptr;  // pcre2_code_8*, owned
    bool jit_ = false;
};

}  // namespace cherenkov::text
