// Pieces shared by printf-style formatting and the format mini-language: padding by code
// points, integer digits in a base, printf of doubles, and Python's ascii().
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

// Python ascii(): repr() with every non-ASCII character escaped.
std::string ascii_repr(const Value& value);
// The first `precision` code points of `text` (all of it when unset).
std::string truncate_code_points(const std::string& text, std::optional<int64_t> precision);
// Appends `body` padded with `fill` to `width` code points; align is '<', '>' or '^'.
void pad(std::string& out, const std::string& body, size_t width, char align, char32_t fill);
// printf of `value` with conversion e, E, f, F, g or G, `precision` digits, optional '#'.
std::string format_double(char conversion, int precision, double value, bool alternate);
// Digits of `magnitude` for format type d/n (decimal), b, o, x or X.
std::string int_digits(uint64_t magnitude, char type);
// |value| without overflow for INT64_MIN.
uint64_t magnitude_of(int64_t value);

}  // namespace cherenkov::text::jinja
