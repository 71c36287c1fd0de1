// Jinja2's builtin filters (with transformers' tojson), looked up by name. Each takes the
// value before the `|` and the call's arguments, binding them like the Python function.
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

using FilterFunction = Value (*)(Renderer& renderer, const Value& value, CallArgs& args);

// nullptr when no supported filter has that name.
FilterFunction find_filter(std::string_view name);
// Empty when `name` is a supported filter; otherwise the error to report: Jinja2's
// "No filter named 'x'." (at parse time; "... found." when evaluated) or, for a Jinja2
// builtin this interpreter leaves out, that it is not supported.
std::string filter_problem(std::string_view name, bool at_runtime = false);

}  // namespace cherenkov::text::jinja
