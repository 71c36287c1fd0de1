// The tokenizer.json "pre_tokenizer": a chain of steps, each splitting every piece the previous
// step produced. Split cuts with a regex or literal and one of Hugging Face's delimiter
// behaviours; ByteLevel optionally adds a prefix space, splits with GPT-2's regex and maps bytes
// to the byte-level alphabet. Pieces stream to a sink one at a time (no list of the whole text).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "text/tokenizer/regex.h"

namespace cherenkov::text {

// Hugging Face's SplitDelimiterBehavior.
enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct SplitStep {
    std::string pattern;
    Regex::Syntax syntax = Regex::Syntax::Pattern;
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    std::string field;  // where the pattern came from, for errors
};

struct ByteLevelStep {
    bool add_prefix_space = false;
    bool use_regex = true;
};

using PreTokenizerStep = std::variant<SplitStep, ByteLevelStep>;

// Receives each final piece; the view is valid only during the call.
class PieceSink {
public:
    virtual ~PieceSink() = default;
    virtual void piece(std::string_view text) = 0;
};

// Buffers reused across calls by one thread.
class PreTokenizerScratch {
public:
    struct Step {
        RegexScratch regex;
        std::string prefixed;
        std::string mapped;
    };
    Step& step(size_t index);

private:
    std::vector<std::unique_ptr<Step>> steps_;
};

class PreTokenizer {
public:
    PreTokenizer();
    explicit PreTokenizer(std::vector<PreTokenizerStep> steps);
    ~PreTokenizer();
    PreTokenizer(PreTokenizer&&) noexcept;
    PreTokenizer& operator=(PreTokenizer&&) noexcept;

    // True when the chain ends in ByteLevel: its byte-to-alphabet mapping is then left to the
    // model, which maps raw bytes straight to token ids (same result, no intermediate string).
    bool emits_raw_bytes() const { return emits_raw_bytes_; }

    // Splits non-empty valid UTF-8 `text` and sends every non-empty piece to `sink`, in order.
    void split(std::string_view text, PreTokenizerScratch& scratch, PieceSink& sink) const;

private:
    struct CompiledStep;
    void run_step(size_t index, std::string_view piece, PreTokenizerScratch& scratch,
                  PieceSink& sink) const;
    void run_split(size_t index, const CompiledStep& step, std::string_view piece,
                   PreTokenizerScratch& scratch, PieceSink& sink) const;
    void run_byte_level(size_t index, const CompiledStep& step, std::string_view piece,
                        PreTokenizerScratch& scratch, PieceSink& sink) const;
    void emit_byte_level(size_t index, std::string_view piece, PreTokenizerScratch& scratch,
                         PieceSink& sink) const;

    std::vector<CompiledStep> steps_;
    bool emits_raw_bytes_ = false;
};

}  // namespace cherenkov::text
