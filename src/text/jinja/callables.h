// The objects templates see besides plain data: namespace(), macros (and call-block callers),
// the `loop` variable, and native functions (builtins and methods of objects).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "text/jinja/ast.h"
#include "text/jinja/scope.h"
#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

// jinja2.utils.Namespace as transformers subclasses it: attributes set through
// {% set ns.attr = value %}; names starting with `_` are refused.
class Namespace : public Object {
public:
    explicit Namespace(Dict attributes) : attributes_(std::move(attributes)) {}
    std::string type_name() const override { return "Namespace"; }
    std::string repr(int depth) const override;
    std::optional<Value> attribute(std::string_view name) const override;
    void set(const std::string& name, Value value);
    void clear() { attributes_ = Dict(); }

    // transformers' TemplateNamespace check; throws for an underscore-prefixed name.
    static void check_name(const std::string& name);

private:
    Dict attributes_;
};

class Macro : public Object {
public:
    // `closure` is the scope the macro was defined in; the Renderer keeps it alive.
    Macro(const MacroDefinition& definition, std::weak_ptr<Scope> closure)
        : definition_(definition), closure_(std::move(closure)) {}
    std::string type_name() const override { return "Macro"; }
    std::string repr(int depth) const override;
    std::optional<Value> attribute(std::string_view name) const override;
    bool is_callable() const override { return true; }
    Value call(Renderer& renderer, CallArgs& args) override;

private:
    const MacroDefinition& definition_;
    std::weak_ptr<Scope> closure_;
};

// jinja2.runtime.LoopContext over materialized items.
class LoopContext : public Object {
public:
    // `recursive_loop` is set for {% for ... recursive %}, making `loop(items)` callable.
    LoopContext(ValueList items, int depth, const ForStmt* recursive_loop,
                std::weak_ptr<Scope> scope)
        : items_(std::move(items)),
          depth_(depth),
          recursive_loop_(recursive_loop),
          scope_(std::move(scope)) {}
    std::string type_name() const override { return "LoopContext"; }
    std::string repr(int depth) const override;
    std::optional<Value> attribute(std::string_view name) const override;
    bool is_callable() const override { return true; }
    Value call(Renderer& renderer, CallArgs& args) override;

    const ValueList& items() const { return items_; }
    void set_index(size_t index) { index_ = index; }

private:
    ValueList items_;
    size_t index_ = 0;
    int depth_;
    const ForStmt* recursive_loop_;
    std::weak_ptr<Scope> scope_;
    std::shared_ptr<std::optional<Value>> last_changed_ = std::make_shared<std::optional<Value>>();
};

// A builtin function or a method bound to its object.
class NativeFunction : public Object {
public:
    using Function = std::function<Value(Renderer&, CallArgs&)>;
    NativeFunction(std::string name, Function function)
        : name_(std::move(name)), function_(std::move(function)) {}
    std::string type_name() const override { return "builtin_function_or_method"; }
    std::string repr(int) const override { return "<built-in function " + name_ + ">"; }
    bool is_callable() const override { return true; }
    Value call(Renderer& renderer, CallArgs& args) override { return function_(renderer, args); }

private:
    std::string name_;
    Function function_;
};

Value make_function(std::string name, NativeFunction::Function function);

}  // namespace cherenkov::text::jinja
