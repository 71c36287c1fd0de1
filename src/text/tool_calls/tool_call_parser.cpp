// Byte-at-a-time state machine over the whole generation (kept in input_), so a call region
// can be returned verbatim when it fails. Each byte is examined once, except that a partly
// matched tag (at most 12 bytes) is examined again after a mismatch and a failed region's
// trailing whitespace once more: linear in the input however it is split.
#include "text/tool_calls/tool_call_parser.h"

#include "base/error.h"

namespace cherenkov::text {

namespace {

using Json = nlohmann::ordered_json;

enum Tag : uint8_t {
    ToolCallOpen,
    FunctionOpen,
    ParameterOpen,
    ParameterClose,
    FunctionClose,
    ToolCallClose,
    NumTags,
};

// Every tag starts with '<' and holds no other '<', so a tag can only start at a '<'.
constexpr std::string_view kTagText[NumTags] = {
    "<tool_call>", "<function=", "<parameter=", "</parameter>", "</function>", "</tool_call>"};

constexpr uint8_t bit(uint8_t tag) {
    return static_cast<uint8_t>(1u << tag);
}

// What may follow a function name or a complete parameter.
constexpr uint8_t kCallTags = bit(ParameterOpen) | bit(FunctionClose) | bit(ToolCallClose) |
                              bit(ToolCallOpen) | bit(FunctionOpen);
constexpr uint8_t kClosingTags = bit(FunctionClose) | bit(ToolCallClose);
constexpr uint8_t kOpeningTags = bit(ToolCallOpen) | bit(FunctionOpen);

constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxDiagnostics = 32;
constexpr size_t kPreviewBytes = 40;
constexpr size_t npos = std::string::npos;

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Bytes at the end of `text` that begin a UTF-8 character whose remaining bytes are missing.
size_t incomplete_utf8_tail(std::string_view text) {
    size_t size = text.size();
    for (size_t back = 1; back <= 3 && back <= size; ++back) {
        auto c = static_cast<unsigned char>(text[size - back]);
        if ((c & 0xC0) == 0x80) continue;
        size_t needed = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return needed > back ? back : 0;
    }
    return 0;
}

std::string preview(std::string_view text) {
    std::string quoted = Json(replace_invalid_utf8(text.substr(0, kPreviewBytes))).dump();
    if (text.size() > kPreviewBytes) quoted += "...";
    return quoted;
}

}  // namespace

ToolCallParser::ToolCallParser(const std::vector<ToolSpec>& tools, uint64_t id_seed)
    : id_seed_(id_seed), space_start_(npos), first_close_(npos), first_discarded_(npos) {
    for (const ToolSpec& tool : tools) param_types_[tool.name] = tool.param_types;
}

ParseDelta ToolCallParser::push(std::string_view chunk) {
    CHERENKOV_ASSERT(!finished_, "ToolCallParser::push after finish");
    input_.append(chunk);
    run();
    if (state_ == State::Text) {
        // Hold back whitespace and a partial <tool_call> that a marker may follow.
        size_t hold = tag_alive_ != 0 ? tag_start_ : pos_;
        if (space_start_ != npos) hold = space_start_;
        release_text(hold);
    }
    return take_delta(/*final=*/false);
}

ParseResult ToolCallParser::finish() {
    CHERENKOV_ASSERT(!finished_, "ToolCallParser::finish called twice");
    finished_ = true;
    finish_open_call();
    release_text(input_.size());
    if (n_discarded_bytes_ > 0) {
        diagnostics_.push_back(
            "discarded " + std::to_string(n_discarded_bytes_) +
            " non-space bytes after the first tool call (first: " + discard_reason_ +
            "), starting " + preview(std::string_view(input_).substr(first_discarded_)));
    }
    if (n_suppressed_diagnostics_ > 0) {
        diagnostics_.push_back(std::to_string(n_suppressed_diagnostics_) +
                               " further tool-call diagnostics suppressed");
    }
    ParseResult result;
    result.tail = take_delta(/*final=*/true);
    result.content = content_;
    result.calls = calls_;
    result.diagnostics = diagnostics_;
    return result;
}

void ToolCallParser::run() {
    while (pos_ < input_.size()) {
        if (tag_alive_ != 0) {
            step_tag(input_[pos_]);
            continue;
        }
        char c = input_[pos_];
        switch (state_) {
            case State::Text:
                if (c == '<') {
                    begin_tag(bit(ToolCallOpen));
                    break;
                }
                if (!is_space(c)) {
                    space_start_ = npos;
                } else if (space_start_ == npos) {
                    space_start_ = pos_;
                }
                ++pos_;
                break;
            case State::CallOpen:
                if (c == '<') {
                    begin_tag(bit(FunctionOpen));
                } else if (is_space(c)) {
                    ++pos_;
                } else {
                    fail_region(pos_, "expected <function= after <tool_call>");
                }
                break;
            case State::FunctionName:
            case State::ParamName: step_name(c); break;
            case State::Body:
            case State::ValueFollow:
                if (c == '<') {
                    begin_tag(kCallTags);
                } else if (is_space(c)) {
                    ++pos_;
                } else if (state_ == State::ValueFollow) {
                    state_ = State::Value;  // that </parameter> belongs to the value
                } else {
                    complete_call();  // name complete, closing tags missing, other text follows
                    enter_text(pos_);
                }
                break;
            case State::Value: {
                size_t found = input_.find('<', pos_);
                if (found == npos) {
                    pos_ = input_.size();
                    break;
                }
                pos_ = found;
                begin_tag(bit(ParameterClose));
                break;
            }
            case State::CallClose:
                if (c == '<') {
                    begin_tag(bit(ToolCallClose) | bit(FunctionOpen));
                } else if (is_space(c)) {
                    ++pos_;
                } else {
                    enter_text(pos_);
                }
                break;
        }
    }
}

void ToolCallParser::begin_tag(uint8_t expected) {
    tag_alive_ = expected;
    tag_start_ = pos_;
    tag_matched_ = 1;
    ++pos_;
}

void ToolCallParser::step_tag(char c) {
    uint8_t alive = 0;
    for (uint8_t tag = 0; tag < NumTags; ++tag) {
        if ((tag_alive_ & bit(tag)) != 0 && kTagText[tag][tag_matched_] == c) alive |= bit(tag);
    }
    if (alive == 0) {
        tag_alive_ = 0;
        on_tag_mismatch();  // c is examined again by the state
        return;
    }
    ++tag_matched_;
    ++pos_;
    for (uint8_t tag = 0; tag < NumTags; ++tag) {
        if ((alive & bit(tag)) != 0 && kTagText[tag].size() == tag_matched_) {
            tag_alive_ = 0;
            on_tag(tag);
            return;
        }
    }
    tag_alive_ = alive;
}

void ToolCallParser::on_tag_mismatch() {
    switch (state_) {
        case State::Text:
            space_start_ = npos;  // the partial tag is plain text
            return;
        case State::CallOpen:
            fail_region(tag_start_, "expected <function= after <tool_call>");
            return;
        case State::Body:
            complete_call();
            enter_text(tag_start_);
            return;
        case State::Value: return;
        case State::ValueFollow:
            state_ = State::Value;  // the candidate </parameter> belongs to the value
            pos_ = tag_start_;      // this '<' may start the real </parameter>
            return;
        case State::CallClose: enter_text(tag_start_); return;
        case State::FunctionName:
        case State::ParamName: break;
    }
    throw_internal("tool call parser: tag mismatch in a name");
}

void ToolCallParser::on_tag(uint8_t tag) {
    switch (state_) {
        case State::Text:
            marker_at_ = tag_start_;
            region_start_ = space_start_ != npos ? space_start_ : tag_start_;
            release_text(region_start_);
            state_ = State::CallOpen;
            return;
        case State::CallOpen:
            state_ = State::FunctionName;
            name_begin_ = pos_;
            return;
        case State::Body: on_call_tag(tag); return;
        case State::Value:
            close_start_ = tag_start_;
            if (first_close_ == npos) first_close_ = tag_start_;
            state_ = State::ValueFollow;
            return;
        case State::ValueFollow:
            end_param(close_start_);
            on_call_tag(tag);
            return;
        case State::CallClose:
            if (tag == ToolCallClose) {
                enter_text(pos_);
                return;
            }
            committed_ = tag_start_;
            region_start_ = tag_start_;
            state_ = State::FunctionName;
            name_begin_ = pos_;
            return;
        case State::FunctionName:
        case State::ParamName: break;
    }
    throw_internal("tool call parser: tag inside a name");
}

// A tag after a function name or a complete parameter.
void ToolCallParser::on_call_tag(uint8_t tag) {
    switch (tag) {
        case ParameterOpen:
            state_ = State::ParamName;
            name_begin_ = pos_;
            return;
        case FunctionClose:
            complete_call();
            committed_ = pos_;
            state_ = State::CallClose;
            return;
        case ToolCallClose:
            complete_call();
            enter_text(pos_);
            return;
        case ToolCallOpen:
            complete_call();
            committed_ = tag_start_;
            marker_at_ = tag_start_;
            region_start_ = tag_start_;
            state_ = State::CallOpen;
            return;
        case FunctionOpen:
            complete_call();
            committed_ = tag_start_;
            region_start_ = tag_start_;
            state_ = State::FunctionName;
            name_begin_ = pos_;
            return;
        default: throw_internal("tool call parser: unexpected tag after a parameter");
    }
}

void ToolCallParser::step_name(char c) {
    bool function = state_ == State::FunctionName;
    if (c != '>') {
        if (c == '<' || c == '\n' || pos_ - name_begin_ >= kMaxNameBytes) {
            fail_region(pos_, function ? "bad function name" : "bad parameter name");
            return;
        }
        ++pos_;
        return;
    }
    size_t begin = name_begin_;
    size_t end = pos_;
    while (begin < end && is_space(input_[begin])) ++begin;
    while (end > begin && is_space(input_[end - 1])) --end;
    if (begin == end) {
        fail_region(pos_, function ? "empty function name" : "empty parameter name");
        return;
    }
    ++pos_;
    if (function) {
        function_name_.assign(input_, begin, end - begin);
        state_ = State::Body;
        return;
    }
    param_ = ParamRange{begin, end, pos_, pos_};
    first_close_ = npos;
    state_ = State::Value;
}

void ToolCallParser::end_param(size_t value_end) {
    param_.value_end = value_end;
    params_.push_back(param_);
}

void ToolCallParser::complete_call() {
    std::string_view input(input_);
    std::vector<RawParameter> raw;
    raw.reserve(params_.size());
    for (const ParamRange& param : params_) {
        raw.push_back({input.substr(param.name_begin, param.name_end - param.name_begin),
                       input.substr(param.value_begin, param.value_end - param.value_begin)});
    }
    auto tool = param_types_.find(function_name_);
    std::vector<std::string> lines;
    ToolCall call = assemble_tool_call(function_name_, raw,
                                       tool == param_types_.end() ? nullptr : &tool->second,
                                       tool_call_id(id_seed_, calls_.size()), lines);
    for (std::string& line : lines) add_diagnostic(std::move(line));
    calls_.push_back(call);
    pending_calls_.push_back(std::move(call));
    params_.clear();
    function_name_.clear();
}

// Leaves a call region that ended well at `at`: the markup before it is consumed.
void ToolCallParser::enter_text(size_t at) {
    committed_ = at;
    pos_ = at;
    state_ = State::Text;
    space_start_ = npos;
}

// The open region cannot be parsed from `at` on. Before any call its bytes are content and
// the whitespace ending them is held as a separator again; after a call they are discarded.
void ToolCallParser::fail_region(size_t at, std::string_view reason) {
    tag_alive_ = 0;
    params_.clear();
    function_name_.clear();
    state_ = State::Text;
    pos_ = at;
    if (!calls_.empty()) {
        discard(committed_, at, "malformed call: " + std::string(reason));
        committed_ = at;
        space_start_ = npos;
        return;
    }
    add_diagnostic("tool call markup at byte " + std::to_string(marker_at_) +
                   " could not be parsed (" + std::string(reason) + "); returned as content");
    size_t end = at;
    while (end > marker_at_ && is_space(input_[end - 1])) --end;
    release_text(end);
    space_start_ = end < at ? end : npos;
}

// Bytes before `end` are decided text: content before the first call, discarded after it.
void ToolCallParser::release_text(size_t end) {
    if (end <= committed_) return;
    if (calls_.empty()) {
        pending_content_.append(input_, committed_, end - committed_);
    } else {
        discard(committed_, end, "text outside calls");
    }
    committed_ = end;
}

void ToolCallParser::discard(size_t begin, size_t end, std::string_view reason) {
    for (size_t at = begin; at < end; ++at) {
        if (is_space(input_[at])) continue;
        if (first_discarded_ == npos) {
            first_discarded_ = at;
            discard_reason_ = reason;
        }
        ++n_discarded_bytes_;
    }
}

// End of output inside a call region: keep the call when its name and parameters are
// complete, else fail the region.
void ToolCallParser::finish_open_call() {
    size_t end = input_.size();
    bool partial_tag = tag_alive_ != 0 && tag_matched_ >= 2;
    uint8_t alive = tag_alive_;
    tag_alive_ = 0;
    switch (state_) {
        case State::Text: return;
        case State::CallOpen: fail_region(end, "output ended after <tool_call>"); return;
        case State::FunctionName: fail_region(end, "output ended inside the function name"); return;
        case State::ParamName: fail_region(end, "output ended inside a parameter name"); return;
        case State::Value:
            if (partial_tag) {  // a cut-off </parameter>
                end_param(tag_start_);
                complete_call();
            } else if (first_close_ != npos) {
                end_param(first_close_);
                complete_call();
                size_t after = first_close_ + kTagText[ParameterClose].size();
                discard(after, end, "text after </parameter> at the end of output");
            } else {
                fail_region(end, "output ended inside a parameter value");
                return;
            }
            break;
        case State::Body:
        case State::ValueFollow:
            if (partial_tag && alive == bit(ParameterOpen)) {
                fail_region(end, "output ended inside <parameter=");
                return;
            }
            if (state_ == State::ValueFollow) end_param(close_start_);
            complete_call();
            if (partial_tag && (alive & kClosingTags) == 0) {
                discard(tag_start_, end, "output ended inside the next call's opening tag");
            }
            break;
        case State::CallClose:
            if (partial_tag && (alive & kOpeningTags) == alive) {
                discard(tag_start_, end, "output ended inside the next call's opening tag");
            }
            break;
    }
    committed_ = end;
    pos_ = end;
    state_ = State::Text;
}

void ToolCallParser::add_diagnostic(std::string line) {
    if (diagnostics_.size() >= kMaxDiagnostics) {
        ++n_suppressed_diagnostics_;
        return;
    }
    diagnostics_.push_back(std::move(line));
}

ParseDelta ToolCallParser::take_delta(bool final) {
    ParseDelta delta;
    size_t keep = final ? 0 : incomplete_utf8_tail(pending_content_);
    size_t ready = pending_content_.size() - keep;
    delta.content.assign(pending_content_, 0, ready);
    pending_content_.erase(0, ready);
    content_ += delta.content;
    delta.calls = std::move(pending_calls_);
    pending_calls_.clear();
    return delta;
}

}  // namespace cherenkov::text
