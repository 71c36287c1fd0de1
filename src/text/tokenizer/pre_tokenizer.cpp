// Pre-tokenizer steps. Each step hands its pieces depth-first to the next one, which yields the
// same order as Hugging Face's breadth-first PreTokenizedString (every step works per piece).
#include "text/tokenizer/pre_tokenizer.h"

#include <optional>

#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/qwen_splitter.h"

namespace cherenkov::text {
namespace {

// tokenizers/src/pre_tokenizers/byte_level.rs, the regex ByteLevel splits with (GPT-2's).
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Applies a SplitBehavior to the stream of segments of one piece (tokenizers'
// NormalizedString::split, rewritten to emit as it goes). Empty results are dropped, as
// PreTokenizedString::split drops them.
template <typename Emit>
class BehaviorMerger {
public:
    BehaviorMerger(SplitBehavior behavior, bool invert, Emit& emit)
        : behavior_(behavior), invert_(invert), emit_(emit) {}

    void push(const MatchSegment& segment) {
        const bool flag = segment.is_match != invert_;
        switch (behavior_) {
            case SplitBehavior::Isolated: emit(segment.begin, segment.end); break;
            case SplitBehavior::Removed:
                if (!flag) emit(segment.begin, segment.end);
                break;
            case SplitBehavior::Contiguous:
                if (have_pending_ && flag == previous_flag_) {
                    pending_end_ = segment.end;
                } else {
                    replace_pending(segment);
                }
                break;
            case SplitBehavior::MergedWithPrevious:
                if (have_pending_ && flag && !previous_flag_) {
                    pending_end_ = segment.end;
                } else {
                    replace_pending(segment);
                }
                break;
            case SplitBehavior::MergedWithNext:
                // A match merges into the segment after it when that one is not a match.
                if (have_pending_ && previous_flag_ && !flag) {
                    pending_end_ = segment.end;
                } else {
                    replace_pending(segment);
                }
                break;
        }
        previous_flag_ = flag;
    }

    void finish() {
        if (have_pending_) emit(pending_begin_, pending_end_);
        have_pending_ = false;
    }

private:
    void replace_pending(const MatchSegment& segment) {
        if (have_pending_) emit(pending_begin_, pending_end_);
        pending_begin_ = segment.begin;
        pending_end_ = segment.end;
        have_pending_ = true;
    }

    void emit(size_t begin, size_t end) {
        if (end > begin) emit_(begin, end);
    }

    SplitBehavior behavior_;
    bool invert_;
    Emit& emit_;
    bool have_pending_ = false;
    bool previous_flag_ = false;
    size_t pending_begin_ = 0;
    size_t pending_end_ = 0;
};

}  // namespace

struct PreTokenizer::CompiledStep {
    bool is_split = false;
    std::optional<QwenSplitter> qwen;  // replaces `regex` for the Qwen patterns
    std::optional<Regex> regex;
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;
    bool add_prefix_space = false;
    bool map_bytes = false;  // ByteLevel that maps here (not deferred to the model)
};

PreTokenizerScratch::Step& PreTokenizerScratch::step(size_t index) {
    while (steps_.size() <= index) steps_.push_back(std::make_unique<Step>());
    return *steps_[index];
}

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer::PreTokenizer(std::vector<PreTokenizerStep> steps) {
    for (size_t index = 0; index < steps.size(); ++index) {
        CompiledStep compiled;
        if (const auto* split = std::get_if<SplitStep>(&steps[index])) {
            compiled.is_split = true;
            if (split->syntax == Regex::Syntax::Pattern)
                compiled.qwen = QwenSplitter::recognize(split->pattern);
            if (!compiled.qwen) compiled.regex.emplace(split->pattern, split->syntax, split->field);
            compiled.behavior = split->behavior;
            compiled.invert = split->invert;
        } else {
            const auto& byte_level = std::get<ByteLevelStep>(steps[index]);
            compiled.add_prefix_space = byte_level.add_prefix_space;
            if (byte_level.use_regex) {
                compiled.regex.emplace(kGpt2Pattern, Regex::Syntax::Pattern, "ByteLevel");
            }
            compiled.map_bytes = index + 1 < steps.size();
            emits_raw_bytes_ = index + 1 == steps.size();
        }
        steps_.push_back(std::move(compiled));
    }
}

void PreTokenizer::split(std::string_view text, PreTokenizerScratch& scratch,
                         PieceSink& sink) const {
    if (text.empty()) return;
    run_step(0, text, scratch, sink);
}

void PreTokenizer::run_step(size_t index, std::string_view piece, PreTokenizerScratch& scratch,
                            PieceSink& sink) const {
    if (index == steps_.size()) {
        sink.piece(piece);
        return;
    }
    const CompiledStep& step = steps_[index];
    if (step.is_split) {
        run_split(index, step, piece, scratch, sink);
    } else {
        run_byte_level(index, step, piece, scratch, sink);
    }
}

void PreTokenizer::run_split(size_t index, const CompiledStep& step, std::string_view piece,
                             PreTokenizerScratch& scratch, PieceSink& sink) const {
    auto emit = [&](size_t begin, size_t end) {
        run_step(index + 1, piece.substr(begin, end - begin), scratch, sink);
    };
    BehaviorMerger<decltype(emit)> merger(step.behavior, step.invert, emit);
    if (step.qwen) {
        step.qwen->for_each_match(piece, [&](size_t begin, size_t end) {
            merger.push(MatchSegment{begin, end, true});
        });
    } else {
        step.regex->for_each_segment(piece, scratch.step(index).regex,
                                     [&](const MatchSegment& segment) { merger.push(segment); });
    }
    merger.finish();
}

void PreTokenizer::run_byte_level(size_t index, const CompiledStep& step, std::string_view piece,
                                  PreTokenizerScratch& scratch, PieceSink& sink) const {
    std::string_view text = piece;
    if (step.add_prefix_space && piece.front() != ' ') {
        std::string& prefixed = scratch.step(index).prefixed;
        prefixed.assign(1, ' ');
        prefixed.append(piece);
        text = prefixed;
    }
    if (!step.regex) {
        if (step.map_bytes) {
            emit_byte_level(index, text, scratch, sink);
        } else {
            run_step(index + 1, text, scratch, sink);
        }
        return;
    }
    step.regex->for_each_segment(text, scratch.step(index).regex, [&](const MatchSegment& segment) {
        if (segment.end == segment.begin) return;
        const std::string_view sub = text.substr(segment.begin, segment.end - segment.begin);
        if (step.map_bytes) {
            emit_byte_level(index, sub, scratch, sink);
        } else {
            run_step(index + 1, sub, scratch, sink);
        }
    });
}

void PreTokenizer::emit_byte_level(size_t index, std::string_view piece,
                                   PreTokenizerScratch& scratch, PieceSink& sink) const {
    std::string& mapped = scratch.step(index).mapped;
    mapped.clear();
    append_byte_level(piece, mapped);
    run_step(index + 1, mapped, scratch, sink);
}

}  // namespace cherenkov::text
