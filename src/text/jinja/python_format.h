// Python string formatting: printf-style `str % args`, str.format() and format(value, spec),
// following CPython's conversion rules and error messages.
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/limits.h"
#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

// `format % args`: args is a tuple of positional values, a dict for %(name)s, or one value.
std::string percent_format(const Value& format, const Value& args);
// format.format(*args, **kwargs), field names with .attribute and [key] lookups.
std::string brace_format(const std::string& format, const CallArgs& args,
                         const RenderLimits& limits);
// Python format(value, spec) (the format mini-language of str, int and float).
std::string format_value(const Value& value, std::string_view spec, const RenderLimits& limits);

}  // namespace cherenkov::text::jinja
