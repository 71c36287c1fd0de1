// Python operators on values: arithmetic, comparison and `in`, with CPython's semantics and
// type-error wording. Strings marked safe (Markup) escape the other operand of + and %.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "text/jinja/limits.h"
#include "text/jinja/lookup.h"
#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

enum class BinaryOp { Add, Sub, Mul, Div, FloorDiv, Mod, Pow };
enum class CompareOp { Eq, Ne, Lt, Le, Gt, Ge, In, NotIn };

Value apply_binary(BinaryOp op, const Value& left, const Value& right, const RenderLimits& limits);
Value negate(const Value& operand);
Value unary_plus(const Value& operand);
bool compare(CompareOp op, const Value& left, const Value& right);
// Python `item in container`.
bool contains(const Value& container, const Value& item);
// Python `a < b` (for sorting); throws for unorderable types.
bool less_than(const Value& left, const Value& right);

// markupsafe.escape of text: & < > ' " as HTML entities.
std::string escape_html(std::string_view text);
// Throws ResourceExhausted when a built string would pass the limit.
void check_string_size(size_t n_bytes, const RenderLimits& limits);
void check_list_size(size_t n_items, const RenderLimits& limits);

}  // namespace cherenkov::text::jinja
