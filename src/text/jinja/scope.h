// Variable scopes as Jinja2 resolves names: a loop iteration, macro call, {% with %} or block
// body gets a child scope whose assignments vanish when it ends; lookups walk to the parent.
// Scopes are shared because macros and loop objects keep their defining scope alive.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

class Scope {
public:
    explicit Scope(std::shared_ptr<Scope> parent) : parent_(std::move(parent)) {}

    // The nearest binding of `name`, or nullptr.
    const Value* find(std::string_view name) const {
        for (const Scope* scope = this; scope != nullptr; scope = scope->parent_.get()) {
            for (const auto& [key, value] : scope->vars_) {
                if (key == name) return &value;
            }
        }
        return nullptr;
    }

    // Binds `name` in this scope (not in a parent).
    void set(std::string_view name, Value value) {
        for (auto& [key, bound] : vars_) {
            if (key == name) {
                bound = std::move(value);
                return;
            }
        }
        vars_.emplace_back(std::string(name), std::move(value));
    }

    // Drops every binding, breaking reference cycles through this scope.
    void clear() { vars_.clear(); }

private:
    std::shared_ptr<Scope> parent_;
    // Scopes hold a handful of names; a vector beats a hash map at that size.
    std::vector<std::pair<std::string, Value>> vars_;
};

using ScopePtr = std::shared_ptr<Scope>;

}  // namespace cherenkov::text::jinja
