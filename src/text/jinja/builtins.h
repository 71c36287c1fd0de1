// Global functions every template sees: Jinja2's defaults (range, dict, namespace, cycler,
// joiner) as the sandbox and transformers define them, plus transformers' raise_exception and
// strftime_now.
#pragma once

#include <optional>
#include <string_view>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

// The builtin named `name`, or nullopt. Context variables shadow these.
std::optional<Value> builtin_global(std::string_view name);

}  // namespace cherenkov::text::jinja
