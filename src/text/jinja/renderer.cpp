// Statement execution: output, control flow, assignment, macros, call/filter blocks and loops,
// with Jinja2's scoping (each loop iteration and macro call in a fresh child scope).
#include "text/jinja/renderer.h"

#include <algorithm>

#include "base/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/call_args.h"
#include "text/jinja/callables.h"
#include "text/jinja/filters.h"
#include "text/jinja/lookup.h"
#include "text/jinja/tests.h"

namespace cherenkov::text::jinja {

Renderer::Renderer(const std::string& template_name, const RenderLimits& limits)
    : template_name_(template_name), limits_(limits) {}

Renderer::~Renderer() {
    for (const auto& weak : namespaces_) {
        if (auto ns = weak.lock()) ns->clear();
    }
    for (const auto& scope : pinned_scopes_) scope->clear();
}

std::string Renderer::render(const Body& body, const Dict& context) {
    root_ = std::make_shared<Scope>(nullptr);
    for (const auto& [key, value] : context.items()) {
        if (key.is_string()) root_->set(key.as_string(), value);
    }
    std::string out;
    out_ = &out;
    try {
        execute(body, root_);
    } catch (const Error& e) {
        if (error_located_) throw;
        throw e.with_context(describe_pos(template_name_, pos_));
    }
    return out;
}

void Renderer::count_step() {
    if (++n_steps_ > limits_.max_steps) {
        throw Error(ErrorKind::ResourceExhausted,
                    "template exceeded " + std::to_string(limits_.max_steps) + " steps");
    }
}

void Renderer::write(std::string_view text) {
    if (out_->size() + text.size() > limits_.max_output_bytes) {
        throw Error(
            ErrorKind::ResourceExhausted,
            "template output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes");
    }
    out_->append(text);
}

void Renderer::adopt(const std::shared_ptr<Namespace>& ns) {
    namespaces_.push_back(ns);
}

void Renderer::raise_from_template(const std::string& message) {
    error_located_ = true;
    throw_invalid(message);
}

Value Renderer::apply_filter(std::string_view name, const Value& value, CallArgs& args) {
    FilterFunction filter = find_filter(name);
    if (filter == nullptr) throw_invalid(filter_problem(name, true));
    count_step();
    return filter(*this, value, args);
}

bool Renderer::apply_test(std::string_view name, const Value& value, CallArgs& args) {
    TestFunction test = find_test(name);
    if (test == nullptr) throw_invalid(test_problem(name, true));
    count_step();
    return test(*this, value, args);
}

std::string Renderer::capture(const Body& body, const ScopePtr& scope, Flow* flow) {
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    Flow result = Flow::Normal;
    try {
        result = execute(body, scope);
    } catch (...) {
        out_ = saved;
        throw;
    }
    out_ = saved;
    if (flow != nullptr) *flow = result;
    return buffer;
}

Renderer::Flow Renderer::execute(const Body& body, const ScopePtr& scope) {
    NestingGuard guard(*this);
    for (const auto& stmt : body) {
        Flow flow = execute_stmt(*stmt, scope);
        if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
}

Renderer::Flow Renderer::execute_stmt(const Stmt& stmt, const ScopePtr& scope) {
    at(stmt.pos);
    count_step();
    switch (stmt.kind) {
        case StmtKind::Text: write(static_cast<const TextStmt&>(stmt).text); return Flow::Normal;
        case StmtKind::Output: {
            Value value = evaluate(*static_cast<const OutputStmt&>(stmt).value, scope);
            write(to_str(value));
            return Flow::Normal;
        }
        case StmtKind::If: {
            const auto& node = static_cast<const IfStmt&>(stmt);
            for (const auto& [condition, body] : node.branches) {
                if (evaluate(*condition, scope).truthy()) return execute(body, scope);
            }
            return execute(node.else_body, scope);
        }
        case StmtKind::For: {
            const auto& loop = static_cast<const ForStmt&>(stmt);
            execute_for(loop, scope, evaluate(*loop.iterable, scope), 1);
            return Flow::Normal;
        }
        case StmtKind::Set: {
            const auto& set = static_cast<const SetStmt&>(stmt);
            Value value = evaluate(*set.value, scope);
            at(stmt.pos);
            assign(set.target, std::move(value), scope);
            return Flow::Normal;
        }
        case StmtKind::BlockSet: {
            const auto& set = static_cast<const BlockSetStmt&>(stmt);
            // The body runs inline in Jinja2: a break or continue in it leaves the loop at once.
            Flow flow = Flow::Normal;
            Value value = Value::string(capture(set.body, std::make_shared<Scope>(scope), &flow));
            if (flow != Flow::Normal) return flow;
            if (set.filter)
                value = evaluate_filter(static_cast<const FilterExpr&>(*set.filter), scope, &value);
            assign(set.target, std::move(value), scope);
            return Flow::Normal;
        }
        case StmtKind::Macro:
            define_macro(static_cast<const MacroStmt&>(stmt), scope);
            return Flow::Normal;
        case StmtKind::CallBlock:
            execute_call_block(static_cast<const CallBlockStmt&>(stmt), scope);
            return Flow::Normal;
        case StmtKind::FilterBlock: {
            const auto& block = static_cast<const FilterBlockStmt&>(stmt);
            Flow flow = Flow::Normal;
            Value body = Value::string(capture(block.body, std::make_shared<Scope>(scope), &flow));
            if (flow != Flow::Normal) return flow;
            write(to_str(
                evaluate_filter(static_cast<const FilterExpr&>(*block.filter), scope, &body)));
            return Flow::Normal;
        }
        case StmtKind::With: {
            const auto& with = static_cast<const WithStmt&>(stmt);
            auto inner = std::make_shared<Scope>(scope);
            for (const auto& [target, value] : with.assignments)
                assign(target, evaluate(*value, scope), inner);
            return execute(with.body, inner);
        }
        case StmtKind::Scope: {
            const auto& block = static_cast<const ScopeStmt&>(stmt);
            execute(block.body, std::make_shared<Scope>(block.sees_locals ? scope : root_));
            return Flow::Normal;
        }
        case StmtKind::Break: return Flow::Break;
        case StmtKind::Continue: return Flow::Continue;
    }
    return Flow::Normal;
}

void Renderer::execute_for(const ForStmt& loop, const ScopePtr& scope, const Value& iterable,
                           int depth) {
    ValueList items = iterate(iterable);
    if (loop.filter) {
        ValueList kept;
        for (auto& item : items) {
            count_step();
            auto probe = std::make_shared<Scope>(scope);
            assign(loop.target, item, probe);
            if (evaluate(*loop.filter, probe).truthy()) kept.push_back(std::move(item));
        }
        items = std::move(kept);
    }
    // Jinja2 clears its "no iteration" flag at the end of each loop body, so the else block
    // also runs when every iteration ended in break or continue before completing.
    bool run_else = true;
    if (!items.empty()) {
        if (loop.recursive) pinned_scopes_.push_back(scope);
        auto context = std::make_shared<LoopContext>(std::move(items), depth,
                                                     loop.recursive ? &loop : nullptr, scope);
        Value loop_value = Value::object(context);
        for (size_t index = 0; index < context->items().size(); ++index) {
            count_step();
            context->set_index(index);
            auto iteration = std::make_shared<Scope>(scope);
            assign(loop.target, context->items()[index], iteration);
            iteration->set("loop", loop_value);
            Flow flow = execute(loop.body, iteration);
            if (flow == Flow::Break) break;
            if (flow == Flow::Normal) run_else = false;
        }
    }
    if (run_else) execute(loop.else_body, std::make_shared<Scope>(scope));
}

Value Renderer::call_loop(const ForStmt& loop, const ScopePtr& scope, const Value& iterable,
                          int depth) {
    if (++call_depth_ > limits_.max_call_depth) {
        --call_depth_;
        throw Error(ErrorKind::ResourceExhausted, "recursive loop nested too deep");
    }
    std::string buffer;
    std::string* saved = out_;
    out_ = &buffer;
    try {
        execute_for(loop, scope, iterable, depth);
    } catch (...) {
        out_ = saved;
        --call_depth_;
        throw;
    }
    out_ = saved;
    --call_depth_;
    return Value::string(std::move(buffer));
}

void Renderer::assign(const Target& target, Value value, const ScopePtr& scope) {
    switch (target.kind) {
        case Target::Kind::Name: scope->set(target.name, std::move(value)); return;
        case Target::Kind::NamespaceAttribute: {
            const Value* ns = scope->find(target.name);
            auto* object = ns != nullptr && ns->is_object()
                               ? dynamic_cast<Namespace*>(ns->as_object().get())
                               : nullptr;
            if (object == nullptr) throw_invalid("cannot assign attribute on non-namespace object");
            object->set(target.attribute, std::move(value));
            return;
        }
        case Target::Kind::Tuple: {
            if (value.is_undefined()) fail_undefined(value);
            ValueList items = iterate(value);
            size_t expected = target.items.size();
            if (items.size() > expected) {
                throw_invalid("too many values to unpack (expected " + std::to_string(expected) +
                              ")");
            }
            if (items.size() < expected) {
                throw_invalid("not enough values to unpack (expected " + std::to_string(expected) +
                              ", got " + std::to_string(items.size()) + ")");
            }
            for (size_t index = 0; index < expected; ++index)
                assign(target.items[index], items[index], scope);
            return;
        }
    }
}

void Renderer::define_macro(const MacroStmt& stmt, const ScopePtr& scope) {
    pinned_scopes_.push_back(scope);
    scope->set(stmt.macro.name, Value::object(std::make_shared<Macro>(stmt.macro, scope)));
}

void Renderer::execute_call_block(const CallBlockStmt& stmt, const ScopePtr& scope) {
    pinned_scopes_.push_back(scope);
    Value caller = Value::object(std::make_shared<Macro>(stmt.caller, scope));
    Value result = evaluate_call(static_cast<const CallExpr&>(*stmt.call), scope, caller);
    at(stmt.pos);
    write(to_str(result));
}

Value Renderer::call_macro(const MacroDefinition& macro, const ScopePtr& closure, CallArgs& args) {
    count_step();
    if (call_depth_ >= limits_.max_call_depth) {
        throw Error(ErrorKind::ResourceExhausted,
                    "macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
    }
    auto scope = std::make_shared<Scope>(closure);
    size_t n_params = macro.params.size();
    if (args.positional.size() > n_params && !macro.uses_varargs) {
        throw_invalid("macro '" + macro.name + "' takes not more than " + std::to_string(n_params) +
                      " argument(s)");
    }
    std::vector<bool> given(n_params, false);
    for (size_t index = 0; index < std::min(n_params, args.positional.size()); ++index) {
        scope->set(macro.params[index], args.positional[index]);
        given[index] = true;
    }
    Dict extra_keywords;
    Value caller = Value::undefined("No caller defined");
    for (auto& [name, value] : args.keywords) {
        auto param = std::find(macro.params.begin(), macro.params.end(), name);
        if (param != macro.params.end()) {
            size_t index = static_cast<size_t>(param - macro.params.begin());
            if (given[index])
                throw_invalid("macro '" + macro.name + "' got multiple values for argument '" +
                              name + "'");
            scope->set(name, value);
            given[index] = true;
        } else if (name == "caller" && macro.uses_caller) {
            caller = value;
        } else if (macro.uses_kwargs) {
            extra_keywords.set(Value::string(name), value);
        } else {
            throw_invalid("macro '" + macro.name + "' takes no keyword argument '" + name + "'");
        }
    }
    size_t first_default = n_params - macro.defaults.size();
    ++call_depth_;
    try {
        for (size_t index = 0; index < n_params; ++index) {
            if (given[index]) continue;
            if (index >= first_default) {
                scope->set(macro.params[index],
                           evaluate(*macro.defaults[index - first_default], scope));
            } else {
                scope->set(
                    macro.params[index],
                    Value::undefined("parameter '" + macro.params[index] + "' was not provided"));
            }
        }
        if (macro.uses_varargs) {
            ValueList rest;
            for (size_t index = n_params; index < args.positional.size(); ++index)
                rest.push_back(args.positional[index]);
            scope->set("varargs", Value::tuple(std::move(rest)));
        }
        if (macro.uses_kwargs) scope->set("kwargs", Value::dict(std::move(extra_keywords)));
        if (macro.uses_caller) scope->set("caller", caller);
        std::string text = capture(macro.body, scope);
        --call_depth_;
        return Value::string(std::move(text));
    } catch (...) {
        --call_depth_;
        throw;
    }
}

}  // namespace cherenkov::text::jinja
