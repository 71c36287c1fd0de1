// Argument binding for builtin filters, tests, functions and methods.
#include "text/jinja/call_args.h"

#include "base/error.h"

namespace cherenkov::text::jinja {

BoundArgs::BoundArgs(std::string_view function, CallArgs& args,
                     std::initializer_list<std::string_view> parameters, size_t n_required)
    : function_(function), names_(parameters), values_(parameters.size()) {
    if (args.positional.size() > names_.size()) {
        throw_invalid(function_ + "() takes at most " + std::to_string(names_.size()) +
                      " argument(s) (" + std::to_string(args.positional.size()) + " given)");
    }
    for (size_t index = 0; index < args.positional.size(); ++index) {
        values_[index] = std::move(args.positional[index]);
    }
    for (auto& [name, value] : args.keywords) {
        size_t index = 0;
        while (index < names_.size() && names_[index] != name) ++index;
        if (index == names_.size()) {
            throw_invalid(function_ + "() got an unexpected keyword argument '" + name + "'");
        }
        if (values_[index]) {
            throw_invalid(function_ + "() got multiple values for argument '" + name + "'");
        }
        values_[index] = std::move(value);
    }
    for (size_t index = 0; index < n_required; ++index) {
        if (!values_[index]) {
            throw_invalid(function_ + "() missing required argument '" +
                          std::string(names_[index]) + "'");
        }
    }
}

Value BoundArgs::get(size_t index, const Value& fallback) const {
    return values_[index] ? *values_[index] : fallback;
}

const Value& BoundArgs::get(size_t index) const {
    static const Value kUndefined;
    return values_[index] ? *values_[index] : kUndefined;
}

std::optional<std::string> BoundArgs::string_or_none(size_t index) const {
    if (!values_[index] || values_[index]->is_none()) return std::nullopt;
    if (!values_[index]->is_string()) {
        throw_invalid(function_ + "() argument '" + std::string(names_[index]) +
                      "' must be str or None, not " + values_[index]->type_name());
    }
    return values_[index]->as_string();
}

std::string BoundArgs::string(size_t index, std::string_view fallback) const {
    if (!values_[index]) return std::string(fallback);
    if (!values_[index]->is_string()) {
        throw_invalid(function_ + "() argument '" + std::string(names_[index]) +
                      "' must be str, not " + values_[index]->type_name());
    }
    return values_[index]->as_string();
}

int64_t BoundArgs::integer(size_t index, int64_t fallback) const {
    if (!values_[index] || values_[index]->is_none()) return fallback;
    if (!values_[index]->is_integral()) {
        throw_invalid(function_ + "() argument '" + std::string(names_[index]) +
                      "' must be an integer, not " + values_[index]->type_name());
    }
    return values_[index]->as_int();
}

bool BoundArgs::flag(size_t index, bool fallback) const {
    return values_[index] ? values_[index]->truthy() : fallback;
}

void require_no_args(std::string_view function, const CallArgs& args) {
    if (!args.positional.empty() || !args.keywords.empty()) {
        throw_invalid(std::string(function) + "() takes no arguments");
    }
}

}  // namespace cherenkov::text::jinja
