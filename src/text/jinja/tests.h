// Jinja2's builtin tests (`x is defined`, `x is divisibleby 3`, ...), looked up by name.
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

using TestFunction = bool (*)(Renderer& renderer, const Value& value, CallArgs& args);

// nullptr when no test has that name.
TestFunction find_test(std::string_view name);
// Empty when `name` is a known test; otherwise Jinja2's "No test named 'x'." (at parse time;
// "... found." when evaluated).
std::string test_problem(std::string_view name, bool at_runtime = false);

}  // namespace cherenkov::text::jinja
