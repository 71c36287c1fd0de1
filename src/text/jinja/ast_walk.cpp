// Expression visitor over statements and expressions.
#include "text/jinja/ast_walk.h"

namespace cherenkov::text::jinja {

namespace {

void walk_expr(const Expr* expr, bool soft, const ExprVisitor& visit) {
    if (expr == nullptr) return;
    if (expr->kind == ExprKind::Conditional) soft = true;
    visit(*expr, soft);
    auto walk_args = [&](const CallArguments& args) {
        for (const auto& arg : args.positional) walk_expr(arg.get(), soft, visit);
        for (const auto& [name, arg] : args.keywords) walk_expr(arg.get(), soft, visit);
        walk_expr(args.star_args.get(), soft, visit);
        walk_expr(args.star_kwargs.get(), soft, visit);
    };
    switch (expr->kind) {
        case ExprKind::List:
            for (const auto& item : static_cast<const ListExpr*>(expr)->items)
                walk_expr(item.get(), soft, visit);
            return;
        case ExprKind::Dict:
            for (const auto& [key, value] : static_cast<const DictExpr*>(expr)->items) {
                walk_expr(key.get(), soft, visit);
                walk_expr(value.get(), soft, visit);
            }
            return;
        case ExprKind::Attribute:
            walk_expr(static_cast<const AttributeExpr*>(expr)->object.get(), soft, visit);
            return;
        case ExprKind::Item: {
            const auto* item = static_cast<const ItemExpr*>(expr);
            walk_expr(item->object.get(), soft, visit);
            walk_expr(item->key.get(), soft, visit);
            return;
        }
        case ExprKind::Slice: {
            const auto* slice = static_cast<const SliceExpr*>(expr);
            for (const auto* part : {&slice->object, &slice->start, &slice->stop, &slice->step}) {
                walk_expr(part->get(), soft, visit);
            }
            return;
        }
        case ExprKind::Call: {
            const auto* call = static_cast<const CallExpr*>(expr);
            walk_expr(call->callee.get(), soft, visit);
            walk_args(call->args);
            return;
        }
        case ExprKind::Filter:
        case ExprKind::Test: {
            const auto* filter = static_cast<const FilterExpr*>(expr);
            walk_expr(filter->operand.get(), soft, visit);
            walk_args(filter->args);
            return;
        }
        case ExprKind::Not:
        case ExprKind::Negate:
        case ExprKind::Plus:
            walk_expr(static_cast<const UnaryExpr*>(expr)->operand.get(), soft, visit);
            return;
        case ExprKind::Binary: {
            const auto* binary = static_cast<const BinaryExpr*>(expr);
            walk_expr(binary->left.get(), soft, visit);
            walk_expr(binary->right.get(), soft, visit);
            return;
        }
        case ExprKind::And:
        case ExprKind::Or: {
            const auto* logical = static_cast<const LogicalExpr*>(expr);
            walk_expr(logical->left.get(), soft, visit);
            walk_expr(logical->right.get(), soft, visit);
            return;
        }
        case ExprKind::Concat:
            for (const auto& part : static_cast<const ConcatExpr*>(expr)->parts)
                walk_expr(part.get(), soft, visit);
            return;
        case ExprKind::Compare: {
            const auto* compare = static_cast<const CompareExpr*>(expr);
            walk_expr(compare->first.get(), soft, visit);
            for (const auto& [op, operand] : compare->rest) walk_expr(operand.get(), soft, visit);
            return;
        }
        case ExprKind::Conditional: {
            const auto* conditional = static_cast<const ConditionalExpr*>(expr);
            walk_expr(conditional->condition.get(), soft, visit);
            walk_expr(conditional->then_value.get(), soft, visit);
            walk_expr(conditional->else_value.get(), soft, visit);
            return;
        }
        case ExprKind::Literal:
        case ExprKind::Name: return;
    }
}

void walk_macro(const MacroDefinition& macro, bool descend_blocks, const ExprVisitor& visit) {
    for (const auto& value : macro.defaults) walk_expr(value.get(), false, visit);
    walk_body(macro.body, false, descend_blocks, visit);
}

void walk_stmt(const Stmt& stmt, bool soft, bool descend_blocks, const ExprVisitor& visit) {
    switch (stmt.kind) {
        case StmtKind::Output:
            walk_expr(static_cast<const OutputStmt&>(stmt).value.get(), soft, visit);
            return;
        case StmtKind::If:
            for (const auto& [condition, body] : static_cast<const IfStmt&>(stmt).branches) {
                walk_expr(condition.get(), true, visit);
                walk_body(body, true, descend_blocks, visit);
            }
            walk_body(static_cast<const IfStmt&>(stmt).else_body, true, descend_blocks, visit);
            return;
        case StmtKind::For: {
            const auto& loop = static_cast<const ForStmt&>(stmt);
            walk_expr(loop.iterable.get(), soft, visit);
            walk_expr(loop.filter.get(), false, visit);
            walk_body(loop.body, false, descend_blocks, visit);
            walk_body(loop.else_body, false, descend_blocks, visit);
            return;
        }
        case StmtKind::Set:
            walk_expr(static_cast<const SetStmt&>(stmt).value.get(), soft, visit);
            return;
        case StmtKind::BlockSet: {
            const auto& set = static_cast<const BlockSetStmt&>(stmt);
            walk_expr(set.filter.get(), false, visit);
            walk_body(set.body, false, descend_blocks, visit);
            return;
        }
        case StmtKind::Macro:
            walk_macro(static_cast<const MacroStmt&>(stmt).macro, descend_blocks, visit);
            return;
        case StmtKind::CallBlock: {
            const auto& call = static_cast<const CallBlockStmt&>(stmt);
            walk_expr(call.call.get(), soft, visit);
            walk_macro(call.caller, descend_blocks, visit);
            return;
        }
        case StmtKind::FilterBlock: {
            const auto& filter = static_cast<const FilterBlockStmt&>(stmt);
            walk_expr(filter.filter.get(), false, visit);
            walk_body(filter.body, false, descend_blocks, visit);
            return;
        }
        case StmtKind::With: {
            const auto& with = static_cast<const WithStmt&>(stmt);
            for (const auto& [target, value] : with.assignments)
                walk_expr(value.get(), soft, visit);
            walk_body(with.body, false, descend_blocks, visit);
            return;
        }
        case StmtKind::Scope: {
            const auto& scope = static_cast<const ScopeStmt&>(stmt);
            if (scope.is_named_block && !descend_blocks) return;
            walk_body(scope.body, false, descend_blocks, visit);
            return;
        }
        case StmtKind::Text:
        case StmtKind::Break:
        case StmtKind::Continue: return;
    }
}

}  // namespace

void walk_body(const Body& body, bool soft, bool descend_blocks, const ExprVisitor& visit) {
    for (const auto& stmt : body) walk_stmt(*stmt, soft, descend_blocks, visit);
}

}  // namespace cherenkov::text::jinja
