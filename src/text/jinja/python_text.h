// Python `str` semantics over UTF-8 bytes: code points, whitespace and case rules, repr() and
// float repr(), so that templates see the same strings Jinja2 (running on CPython) produces.
// Every function here expects valid UTF-8; the interpreter validates text where it enters.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::text::jinja {

bool is_valid_utf8(std::string_view text);
std::u32string decode_utf8(std::string_view text);
void append_utf8(std::string& out, char32_t code_point);
std::string encode_utf8(std::u32string_view code_points);
size_t count_code_points(std::string_view text);
// Byte offset of code point `index` (clamped to the end of `text`).
size_t code_point_offset(std::string_view text, size_t index);

// Character classes as CPython's unicodeobject.c defines them.
bool is_space(char32_t c);
bool is_printable(char32_t c);
bool is_alpha(char32_t c);
bool is_decimal(char32_t c);
bool is_digit(char32_t c);
bool is_numeric(char32_t c);
bool is_cased(char32_t c);
bool is_upper(char32_t c);
bool is_lower(char32_t c);
bool is_word_char(char32_t c);  // regex \w

std::string py_upper(std::string_view text);
std::string py_lower(std::string_view text);
std::string py_title(std::string_view text);       // str.title()
std::string py_capitalize(std::string_view text);  // str.capitalize()
std::string py_swapcase(std::string_view text);

enum class StripSide { Both, Left, Right };
// str.strip/lstrip/rstrip; `chars` unset strips whitespace.
std::string py_strip(std::string_view text, const std::optional<std::string>& chars,
                     StripSide side);

// str.split / str.rsplit; `separator` unset splits on whitespace runs. max_splits < 0: no limit.
// Throws InvalidInput on an empty separator (Python's ValueError).
std::vector<std::string> py_split(std::string_view text,
                                  const std::optional<std::string>& separator, int64_t max_splits);
std::vector<std::string> py_rsplit(std::string_view text,
                                   const std::optional<std::string>& separator, int64_t max_splits);
std::vector<std::string> py_splitlines(std::string_view text, bool keep_ends);
// str.replace with count < 0 meaning all; an empty `old` inserts between code points.
std::string py_replace(std::string_view text, std::string_view old_text, std::string_view new_text,
                       int64_t count);

// repr() of a str: quotes and escapes exactly as CPython does.
std::string repr_string(std::string_view text);
// repr() of a float: shortest round-trip digits, exponent outside [1e-4, 1e16).
std::string repr_float(double value);

}  // namespace cherenkov::text::jinja
