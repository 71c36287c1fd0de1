// Bounds that keep a hostile or broken template from hanging or exhausting memory: each is
// checked where the work happens and exceeding one throws ResourceExhausted.
#pragma once

#include <cstddef>
#include <cstdint>

namespace cherenkov::text::jinja {

struct RenderLimits {
    // The rendered text. Prompts are at most a few MiB even for million-token contexts.
    size_t max_output_bytes = size_t{64} << 20;
    // Any one string built while rendering (concatenation, repetition, join, replace, ...).
    size_t max_string_bytes = size_t{64} << 20;
    // Any one list built while rendering (repetition, concatenation, range, ...).
    size_t max_list_items = size_t{1} << 22;
    // Loop iterations plus macro calls plus filter and function calls over the whole render.
    // A 1000-message conversation through the Qwen3.5 template takes about 20 thousand.
    uint64_t max_steps = 20'000'000;
    // Nested macro and caller() calls (Jinja2 runs out of Python stack near 300).
    int max_call_depth = 100;
};

// Nesting of expressions and statements the parser accepts; deeper templates are rejected
// rather than recursed into.
inline constexpr int kMaxParseDepth = 100;

}  // namespace cherenkov::text::jinja
