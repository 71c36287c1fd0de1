// Incremental parser for the XML-style tool calls of Qwen3-Coder and Qwen3.5 templates:
//   <tool_call>\n<function=NAME>\n<parameter=ARG>\nVALUE\n</parameter>\n</function>\n</tool_call>
// Text before the first call is content; call markup and anything after the calls are not.
// Feeding the same bytes in any split gives the same content (concatenated), calls and
// diagnostics, and the work is linear in the input however it is split.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/tool_calls/tool_call.h"
#include "text/tool_calls/tool_spec.h"

namespace cherenkov::text {

struct ParseDelta {
    std::string content;          // safe to emit now; never ends inside a UTF-8 character
    std::vector<ToolCall> calls;  // calls completed by this input
};

struct ParseResult {
    ParseDelta tail;                       // what finish() released beyond earlier pushes
    std::string content;                   // all content of the generation, in order
    std::vector<ToolCall> calls;           // all calls, in order
    std::vector<std::string> diagnostics;  // one line each, in the order found
};

// Rules (where the issue left the choice to us):
// - Whitespace right before a <tool_call> that parses is dropped; a region that cannot be
//   parsed before any call is content, verbatim, and scanning resumes where it failed.
// - After the first call, text that is not a call is discarded (one summary diagnostic) but a
//   later well-formed <tool_call> is still parsed; a malformed later call is discarded too.
// - A value ends at the first </parameter> followed by optional whitespace and a call tag
//   (<parameter=, </function>, </tool_call>, <tool_call>, <function=); any other </parameter>
//   is part of the value. At the end of output, a value without such an ending ends at its
//   first </parameter> (the rest is a discarded suffix).
// - A call whose name and parameters are complete is kept when its closing tags are missing or
//   followed by other text; a call whose last parameter is cut short is not.
// - A function the request did not declare is kept with a diagnostic (as vLLM and llama.cpp
//   keep it), its arguments left as strings.
class ToolCallParser {
public:
    // `id_seed` makes call ids deterministic per request (tool_call_id(id_seed, index)).
    explicit ToolCallParser(const std::vector<ToolSpec>& tools, uint64_t id_seed = 0);

    ParseDelta push(std::string_view chunk);

    // Ends the generation: releases held-back bytes, recovers or rejects an open call.
    // Neither push() nor finish() may be called afterwards.
    ParseResult finish();

private:
    enum class State : uint8_t {
        Text,          // outside calls: content before the first call, discarded after it
        CallOpen,      // after <tool_call>: whitespace, then <function=
        FunctionName,  // after <function=: the name, up to '>'
        Body,          // after <function=NAME>: whitespace, then a call tag
        ParamName,     // after <parameter=: the name, up to '>'
        Value,         // parameter text, up to a </parameter>
        ValueFollow,   // after a candidate </parameter>: whitespace, then a call tag
        CallClose,     // after </function>: whitespace, then </tool_call> or <function=
    };

    struct ParamRange {
        size_t name_begin;
        size_t name_end;
        size_t value_begin;
        size_t value_end;
    };

    void run();
    void step_tag(char c);
    void on_tag(uint8_t tag);
    void on_tag_mismatch();
    void on_call_tag(uint8_t tag);
    void step_name(char c);
    void begin_tag(uint8_t expected);
    void begin_call(size_t region_start);
    void end_param(size_t value_end);
    void complete_call();
    void enter_text(size_t at);
    void fail_region(size_t at, std::string_view reason);
    void release_text(size_t end);
    void discard(size_t begin, size_t end, std::string_view reason);
    void finish_open_call();
    void add_diagnostic(std::string line);
    ParseDelta take_delta(bool final);

    std::unordered_map<std::string, std::map<std::string, JsonTypeSet>> param_types_;
    uint64_t id_seed_;

    std::string input_;     // every byte pushed so far
    size_t pos_ = 0;        // next byte to examine
    size_t committed_ = 0;  // bytes before this are emitted, discarded or consumed as markup
    State state_ = State::Text;
    bool finished_ = false;

    // A tag being matched: which tags are still possible and how many bytes matched.
    uint8_t tag_alive_ = 0;
    size_t tag_start_ = 0;
    size_t tag_matched_ = 0;

    size_t space_start_;       // Text: start of the whitespace run ending at pos_, or npos
    size_t region_start_ = 0;  // the open call region, with its separator whitespace
    size_t marker_at_ = 0;     // its <tool_call>
    size_t name_begin_ = 0;    // FunctionName, ParamName: first byte of the name
    std::string function_name_;
    std::vector<ParamRange> params_;
    ParamRange param_{};      // the parameter being read
    size_t first_close_;      // Value: first </parameter> inside the value, or npos
    size_t close_start_ = 0;  // ValueFollow: the candidate </parameter>

    std::string pending_content_;  // decided content not yet returned
    std::vector<ToolCall> pending_calls_;
    std::string content_;
    std::vector<ToolCall> calls_;
    std::vector<std::string> diagnostics_;
    size_t n_suppressed_diagnostics_ = 0;
    size_t n_discarded_bytes_ = 0;  // non-whitespace bytes discarded after the calls
    size_t first_discarded_;        // npos until something is discarded
    std::string discard_reason_;
};

}  // namespace cherenkov::text
