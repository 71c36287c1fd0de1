// Binding of call arguments (positional and keyword) to a Python-style parameter list, with
// CPython's error messages for missing, duplicate and unexpected arguments.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

class BoundArgs {
public:
    // Binds `args` to `parameters` in order; the first `n_required` must be given.
    BoundArgs(std::string_view function, CallArgs& args,
              std::initializer_list<std::string_view> parameters, size_t n_required = 0);

    bool has(size_t index) const { return values_[index].has_value(); }
    // The argument at `index`, or `fallback` when it was not given.
    // By value: `fallback` is usually a temporary.
    Value get(size_t index, const Value& fallback) const;
    const Value& get(size_t index) const;
    // Typed accessors; each throws InvalidInput naming the function and parameter on a wrong type.
    std::optional<std::string> string_or_none(size_t index) const;
    std::string string(size_t index, std::string_view fallback) const;
    int64_t integer(size_t index, int64_t fallback) const;
    bool flag(size_t index, bool fallback) const;

private:
    std::string function_;
    std::vector<std::string_view> names_;
    std::vector<std::optional<Value>> values_;
};

// Throws unless the call passed no arguments at all.
void require_no_args(std::string_view function, const CallArgs& args);

}  // namespace cherenkov::text::jinja
