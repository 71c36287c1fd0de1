// Namespace, Macro, LoopContext and NativeFunction: attributes, repr and calls.
#include "text/jinja/callables.h"

#include "base/error.h"
#include "text/jinja/call_args.h"
#include "text/jinja/renderer.h"

namespace cherenkov::text::jinja {

std::string Namespace::repr(int depth) const {
    return "<Namespace " + jinja::repr(Value::dict(attributes_), depth) + ">";
}

std::optional<Value> Namespace::attribute(std::string_view name) const {
    if (const Value* found = attributes_.find(name)) return *found;
    return std::nullopt;
}

void Namespace::check_name(const std::string& name) {
    if (!name.empty() && name[0] == '_') {
        throw_invalid(
            "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
            name + "'. Please rename the attribute.");
    }
}

void Namespace::set(const std::string& name, Value value) {
    check_name(name);
    attributes_.set(Value::string(name), std::move(value));
}

std::string Macro::repr(int) const {
    return "<Macro '" + definition_.name + "'>";
}

std::optional<Value> Macro::attribute(std::string_view name) const {
    if (name == "name") return Value::string(definition_.name);
    if (name == "arguments") {
        ValueList names;
        for (const auto& param : definition_.params) names.push_back(Value::string(param));
        return Value::tuple(std::move(names));
    }
    if (name == "catch_kwargs") return Value::boolean(definition_.uses_kwargs);
    if (name == "catch_varargs") return Value::boolean(definition_.uses_varargs);
    if (name == "caller") return Value::boolean(definition_.uses_caller);
    return std::nullopt;
}

Value Macro::call(Renderer& renderer, CallArgs& args) {
    ScopePtr closure = closure_.lock();
    if (!closure) throw_internal("macro '" + definition_.name + "' outlived its render");
    return renderer.call_macro(definition_, closure, args);
}

std::string LoopContext::repr(int) const {
    return "<LoopContext " + std::to_string(index_ + 1) + "/" + std::to_string(items_.size()) + ">";
}

std::optional<Value> LoopContext::attribute(std::string_view name) const {
    auto n = static_cast<int64_t>(items_.size());
    auto index = static_cast<int64_t>(index_);
    if (name == "index") return Value::integer(index + 1);
    if (name == "index0") return Value::integer(index);
    if (name == "revindex") return Value::integer(n - index);
    if (name == "revindex0") return Value::integer(n - index - 1);
    if (name == "first") return Value::boolean(index == 0);
    if (name == "last") return Value::boolean(index + 1 == n);
    if (name == "length") return Value::integer(n);
    if (name == "depth") return Value::integer(depth_);
    if (name == "depth0") return Value::integer(depth_ - 1);
    if (name == "previtem") {
        if (index == 0) return Value::undefined("there is no previous item");
        return items_[index_ - 1];
    }
    if (name == "nextitem") {
        if (index + 1 >= n) return Value::undefined("there is no next item");
        return items_[index_ + 1];
    }
    if (name == "cycle") {
        size_t position = index_;
        return make_function("cycle", [position](Renderer&, CallArgs& args) {
            if (!args.keywords.empty()) throw_invalid("cycle() takes no keyword arguments");
            if (args.positional.empty()) throw_invalid("no items for cycling given");
            return args.positional[position % args.positional.size()];
        });
    }
    if (name == "changed") {
        auto last = last_changed_;
        return make_function("changed", [last](Renderer&, CallArgs& args) {
            Value current = Value::tuple(args.positional);
            if (*last && values_equal(**last, current)) return Value::boolean(false);
            *last = current;
            return Value::boolean(true);
        });
    }
    return std::nullopt;
}

Value LoopContext::call(Renderer& renderer, CallArgs& args) {
    if (recursive_loop_ == nullptr) {
        throw_invalid("The loop must be marked as 'recursive' to call it recursively.");
    }
    BoundArgs bound("loop", args, {"iterable"}, 1);
    ScopePtr scope = scope_.lock();
    if (!scope) throw_internal("loop outlived its render");
    return renderer.call_loop(*recursive_loop_, scope, bound.get(0), depth_ + 1);
}

Value make_function(std::string name, NativeFunction::Function function) {
    return Value::object(std::make_shared<NativeFunction>(std::move(name), std::move(function)));
}

}  // namespace cherenkov::text::jinja
