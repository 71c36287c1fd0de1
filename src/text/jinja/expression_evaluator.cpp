// Expression evaluation: names, literals and displays, lookups, calls, filters, tests and
// operators, each recording its position first so that an error names it.
#include <algorithm>

#include "base/error.h"
#include "text/jinja/builtins.h"
#include "text/jinja/lookup.h"
#include "text/jinja/renderer.h"

namespace cherenkov::text::jinja {

Value Renderer::evaluate(const Expr& expr, const ScopePtr& scope) {
    NestingGuard guard(*this);
    return evaluate_node(expr, scope);
}

Value Renderer::evaluate_node(const Expr& expr, const ScopePtr& scope) {
    switch (expr.kind) {
        case ExprKind::Literal: return static_cast<const LiteralExpr&>(expr).value;
        case ExprKind::Name: return lookup(static_cast<const NameExpr&>(expr).name, scope);
        case ExprKind::List:
        case ExprKind::Dict: return evaluate_collection(expr, scope);
        case ExprKind::Attribute: {
            const auto& node = static_cast<const AttributeExpr&>(expr);
            Value object = evaluate(*node.object, scope);
            at(expr.pos);
            return get_attribute(object, node.name);
        }
        case ExprKind::Item: {
            const auto& node = static_cast<const ItemExpr&>(expr);
            Value object = evaluate(*node.object, scope);
            Value key = evaluate(*node.key, scope);
            at(expr.pos);
            return get_item(object, key);
        }
        case ExprKind::Slice: {
            const auto& node = static_cast<const SliceExpr&>(expr);
            Value object = evaluate(*node.object, scope);
            auto bound = [&](const ExprPtr& part) -> std::optional<Value> {
                if (!part) return std::nullopt;
                return evaluate(*part, scope);
            };
            auto start = bound(node.start);
            auto stop = bound(node.stop);
            auto step = bound(node.step);
            at(expr.pos);
            return get_slice(object, start, stop, step);
        }
        case ExprKind::Call: return evaluate_call(static_cast<const CallExpr&>(expr), scope);
        case ExprKind::Filter:
            return evaluate_filter(static_cast<const FilterExpr&>(expr), scope, nullptr);
        case ExprKind::Test: {
            const auto& node = static_cast<const FilterExpr&>(expr);
            Value operand = evaluate(*node.operand, scope);
            CallArgs args = evaluate_args(node.args, scope);
            at(expr.pos);
            return Value::boolean(apply_test(node.name, operand, args));
        }
        case ExprKind::Not:
            return Value::boolean(
                !evaluate(*static_cast<const UnaryExpr&>(expr).operand, scope).truthy());
        case ExprKind::Negate:
        case ExprKind::Plus: {
            Value operand = evaluate(*static_cast<const UnaryExpr&>(expr).operand, scope);
            at(expr.pos);
            return expr.kind == ExprKind::Negate ? negate(operand) : unary_plus(operand);
        }
        case ExprKind::Binary: {
            const auto& node = static_cast<const BinaryExpr&>(expr);
            Value left = evaluate(*node.left, scope);
            Value right = evaluate(*node.right, scope);
            at(expr.pos);
            return apply_binary(node.op, left, right, limits_);
        }
        case ExprKind::Concat: return evaluate_concat(static_cast<const ConcatExpr&>(expr), scope);
        case ExprKind::Compare:
            return evaluate_compare(static_cast<const CompareExpr&>(expr), scope);
        case ExprKind::And:
        case ExprKind::Or: {
            const auto& node = static_cast<const LogicalExpr&>(expr);
            Value left = evaluate(*node.left, scope);
            if (left.truthy() == (expr.kind == ExprKind::Or)) return left;
            return evaluate(*node.right, scope);
        }
        case ExprKind::Conditional: {
            const auto& node = static_cast<const ConditionalExpr&>(expr);
            if (evaluate(*node.condition, scope).truthy()) return evaluate(*node.then_value, scope);
            if (node.else_value) return evaluate(*node.else_value, scope);
            return Value::undefined("the inline if-expression on line " +
                                    std::to_string(expr.pos.line) +
                                    " evaluated to false and no else section was defined.");
        }
    }
    throw_internal("unknown expression kind");
}

Value Renderer::lookup(const std::string& name, const ScopePtr& scope) {
    if (const Value* found = scope->find(name)) return *found;
    if (auto builtin = builtin_global(name)) return *builtin;
    return Value::undefined("'" + name + "' is undefined");
}

Value Renderer::evaluate_collection(const Expr& expr, const ScopePtr& scope) {
    if (expr.kind == ExprKind::List) {
        const auto& node = static_cast<const ListExpr&>(expr);
        ValueList items;
        items.reserve(node.items.size());
        for (const auto& item : node.items) items.push_back(evaluate(*item, scope));
        at(expr.pos);
        return node.is_tuple ? Value::tuple(std::move(items)) : Value::list(std::move(items));
    }
    Dict dict;
    for (const auto& [key_expr, value_expr] : static_cast<const DictExpr&>(expr).items) {
        Value key = evaluate(*key_expr, scope);
        Value value = evaluate(*value_expr, scope);
        at(key_expr->pos);
        dict.set(std::move(key), std::move(value));
    }
    at(expr.pos);
    return Value::dict(std::move(dict));
}

CallArgs Renderer::evaluate_args(const CallArguments& args, const ScopePtr& scope) {
    CallArgs out;
    for (const auto& arg : args.positional) out.positional.push_back(evaluate(*arg, scope));
    for (const auto& [name, arg] : args.keywords)
        out.keywords.emplace_back(name, evaluate(*arg, scope));
    if (args.star_args) {
        Value extra = evaluate(*args.star_args, scope);
        at(args.star_args->pos);
        for (auto& item : iterate(extra)) out.positional.push_back(std::move(item));
    }
    if (args.star_kwargs) {
        Value extra = evaluate(*args.star_kwargs, scope);
        at(args.star_kwargs->pos);
        if (!extra.is_dict())
            throw_invalid("argument after ** must be a mapping, not " + extra.type_name());
        for (const auto& item : extra.as_dict().items()) {
            if (!item.first.is_string()) throw_invalid("keywords must be strings");
            const std::string& name = item.first.as_string();
            bool duplicate =
                std::any_of(out.keywords.begin(), out.keywords.end(),
                            [&](const auto& keyword) { return keyword.first == name; });
            if (duplicate) throw_invalid("got multiple values for keyword argument '" + name + "'");
            out.keywords.emplace_back(name, item.second);
        }
    }
    return out;
}

Value Renderer::evaluate_call(const CallExpr& call, const ScopePtr& scope,
                              std::optional<Value> caller) {
    Value callee = evaluate(*call.callee, scope);
    CallArgs args = evaluate_args(call.args, scope);
    if (caller) args.keywords.emplace_back("caller", *caller);
    at(call.pos);
    if (callee.is_undefined()) fail_undefined(callee);
    if (!callee.is_object() || !callee.as_object()->is_callable()) {
        throw_invalid("'" + callee.type_name() + "' object is not callable");
    }
    count_step();
    // `callee` holds a reference, so the object outlives the call whatever the call rebinds.
    return callee.as_object()->call(*this, args);
}

Value Renderer::evaluate_filter(const FilterExpr& filter, const ScopePtr& scope,
                                const Value* block_output) {
    Value operand;
    if (filter.operand) {
        operand = evaluate_filter_operand(filter, scope, block_output);
    } else if (block_output != nullptr) {
        operand = *block_output;
    }
    CallArgs args = evaluate_args(filter.args, scope);
    at(filter.pos);
    return apply_filter(filter.name, operand, args);
}

Value Renderer::evaluate_filter_operand(const FilterExpr& filter, const ScopePtr& scope,
                                        const Value* block_output) {
    // In a filter block or {% set x | f %}, the innermost filter of the chain takes the output.
    if (block_output != nullptr && filter.operand->kind == ExprKind::Filter) {
        return evaluate_filter(static_cast<const FilterExpr&>(*filter.operand), scope,
                               block_output);
    }
    return evaluate(*filter.operand, scope);
}

Value Renderer::evaluate_compare(const CompareExpr& compare, const ScopePtr& scope) {
    Value left = evaluate(*compare.first, scope);
    for (const auto& [op, operand] : compare.rest) {
        Value right = evaluate(*operand, scope);
        at(operand->pos);
        if (!jinja::compare(op, left, right)) return Value::boolean(false);
        left = std::move(right);
    }
    return Value::boolean(true);
}

Value Renderer::evaluate_concat(const ConcatExpr& concat, const ScopePtr& scope) {
    std::string out;
    for (const auto& part : concat.parts) {
        out += to_str(evaluate(*part, scope));
        at(concat.pos);
        check_string_size(out.size(), limits_);
    }
    return Value::string(std::move(out));
}

}  // namespace cherenkov::text::jinja
