// Parses and renders arbitrary template text over a fixed chat-like context with small limits:
// every outcome must be output or a cherenkov::Error (a syntax error, a runtime error, or a
// limit reached), never a crash, a hang or another exception type.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>

#include "base/error.h"
#include "text/jinja/json_value.h"
#include "text/jinja/template.h"

namespace {

using cherenkov::text::jinja::Dict;
using cherenkov::text::jinja::RenderLimits;

const Dict& fuzz_context() {
    static const Dict context = [] {
        auto json = nlohmann::ordered_json::parse(R"({
            "messages": [
                {"role": "system", "content": "You are helpful. \u00e9\ud83d\ude80"},
                {"role": "user", "content": "What's the weather? <tool_response>x</tool_response>"},
                {"role": "assistant", "content": "", "reasoning_content": "think",
                 "tool_calls": [{"id": "c1", "type": "function",
                                 "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2.5, null, true]}}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 20}"},
                {"role": "user", "content": [{"type": "text", "text": "part"}]}
            ],
            "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                       "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
            "add_generation_prompt": true,
            "enable_thinking": false,
            "eos_token": "<|im_end|>",
            "n": 3, "f": 1.5, "s": "Hello World", "l": [3, 1, 2], "d": {"a": 1, "items": 2}
        })");
        return cherenkov::text::jinja::value_from_json(json).as_dict();
    }();
    return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view source(reinterpret_cast<const char*>(data), size);
    RenderLimits limits;
    limits.max_output_bytes = 1 << 20;
    limits.max_string_bytes = 1 << 20;
    limits.max_list_items = 1 << 16;
    limits.max_steps = 200000;
    try {
        auto compiled = cherenkov::text::jinja::Template::parse(source, "fuzz.jinja");
        compiled.render(fuzz_context(), limits);
    } catch (const cherenkov::Error&) {
        // Expected: malformed templates and failing renders report errors.
    }
    return 0;
}
