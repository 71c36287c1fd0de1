// Attribute and item lookup as Jinja2's sandboxed environment does it (Python attribute
// first for `.`, item first for `[]`, refusals for private and mutating attributes), plus
// slicing, iteration and len().
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

// The sandbox's getattr: Python attribute first (methods), then the item; undefined when
// neither exists. Looking anything up on an undefined throws its message.
Value get_attribute(const Value& object, std::string_view name);
// The sandbox's getitem: the item first, then (for a str key) the attribute.
Value get_item(const Value& object, const Value& key);
// object[start:stop:step]; an unset bound is None. Throws for types without slicing.
Value get_slice(const Value& object, const std::optional<Value>& start,
                const std::optional<Value>& stop, const std::optional<Value>& step);

// Python iter(value) collected into a list: list items, dict keys, str characters; an
// undefined yields nothing. Throws for values that are not iterable.
ValueList iterate(const Value& value);
// Python len(value); undefined has length 0.
size_t length(const Value& value);

// Throws the error an undefined reports when it is used (UndefinedError or SecurityError).
[[noreturn]] void fail_undefined(const Value& undefined);
// Jinja2's undefined for a missing attribute `name` of `object`.
Value missing_attribute(const Value& object, std::string_view name);

}  // namespace cherenkov::text::jinja
