// Python attributes of builtin values as the sandbox exposes them: bound methods of str, list,
// dict, int and float, and the sandbox's refusal (an unsafe undefined) for list and dict
// methods that mutate.
#pragma once

#include <optional>
#include <string_view>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

// The attribute `name` of a non-object value; nullopt when its Python type has none.
std::optional<Value> builtin_attribute(const Value& self, std::string_view name);

}  // namespace cherenkov::text::jinja
