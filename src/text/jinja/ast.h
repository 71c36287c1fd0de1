// The parsed template: expression and statement nodes mirroring jinja2.nodes. Nodes are
// plain data; the Renderer walks them. Each node records where it starts for error messages.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "text/jinja/operators.h"
#include "text/jinja/source_pos.h"
#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

// ---- expressions ----

enum class ExprKind {
    Literal,
    Name,
    List,  // list or tuple display
    Dict,
    Attribute,  // a.b
    Item,       // a[b]
    Slice,      // a[b:c:d]
    Call,
    Filter,
    Test,
    Not,
    Negate,
    Plus,
    Binary,
    Concat,  // a ~ b ~ c
    Compare,
    And,
    Or,
    Conditional,  // a if b else c
};

struct Expr {
    Expr(ExprKind node_kind, SourcePos at) : kind(node_kind), pos(at) {}
    virtual ~Expr() = default;
    ExprKind kind;
    SourcePos pos;
};
using ExprPtr = std::unique_ptr<Expr>;

struct CallArguments {
    std::vector<ExprPtr> positional;
    std::vector<std::pair<std::string, ExprPtr>> keywords;
    ExprPtr star_args;    // *args
    ExprPtr star_kwargs;  // **kwargs
};

struct LiteralExpr : Expr {
    LiteralExpr(SourcePos at, Value literal)
        : Expr(ExprKind::Literal, at), value(std::move(literal)) {}
    Value value;
};

struct NameExpr : Expr {
    NameExpr(SourcePos at, std::string variable)
        : Expr(ExprKind::Name, at), name(std::move(variable)) {}
    std::string name;
};

struct ListExpr : Expr {
    ListExpr(SourcePos at, bool tuple) : Expr(ExprKind::List, at), is_tuple(tuple) {}
    std::vector<ExprPtr> items;
    bool is_tuple;
};

struct DictExpr : Expr {
    explicit DictExpr(SourcePos at) : Expr(ExprKind::Dict, at) {}
    std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct AttributeExpr : Expr {
    AttributeExpr(SourcePos at, ExprPtr owner, std::string attribute)
        : Expr(ExprKind::Attribute, at), object(std::move(owner)), name(std::move(attribute)) {}
    ExprPtr object;
    std::string name;
};

struct ItemExpr : Expr {
    ItemExpr(SourcePos at, ExprPtr owner, ExprPtr index)
        : Expr(ExprKind::Item, at), object(std::move(owner)), key(std::move(index)) {}
    ExprPtr object;
    ExprPtr key;
};

struct SliceExpr : Expr {
    explicit SliceExpr(SourcePos at) : Expr(ExprKind::Slice, at) {}
    ExprPtr object;
    ExprPtr start;  // null bounds are None
    ExprPtr stop;
    ExprPtr step;
};

struct CallExpr : Expr {
    CallExpr(SourcePos at, ExprPtr function)
        : Expr(ExprKind::Call, at), callee(std::move(function)) {}
    ExprPtr callee;
    CallArguments args;
};

// `operand | name(args)`, and `operand is name(args)` for ExprKind::Test. A filter block's
// filters have no operand: they apply to the block's output.
struct FilterExpr : Expr {
    FilterExpr(ExprKind node_kind, SourcePos at, ExprPtr subject, std::string filter_name)
        : Expr(node_kind, at), operand(std::move(subject)), name(std::move(filter_name)) {}
    ExprPtr operand;
    std::string name;
    CallArguments args;
};

struct UnaryExpr : Expr {
    UnaryExpr(ExprKind node_kind, SourcePos at, ExprPtr subject)
        : Expr(node_kind, at), operand(std::move(subject)) {}
    ExprPtr operand;
};

struct BinaryExpr : Expr {
    BinaryExpr(SourcePos at, BinaryOp binary_op, ExprPtr lhs, ExprPtr rhs)
        : Expr(ExprKind::Binary, at), op(binary_op), left(std::move(lhs)), right(std::move(rhs)) {}
    BinaryOp op;
    ExprPtr left;
    ExprPtr right;
};

// And, Or.
struct LogicalExpr : Expr {
    LogicalExpr(ExprKind node_kind, SourcePos at, ExprPtr lhs, ExprPtr rhs)
        : Expr(node_kind, at), left(std::move(lhs)), right(std::move(rhs)) {}
    ExprPtr left;
    ExprPtr right;
};

struct ConcatExpr : Expr {
    explicit ConcatExpr(SourcePos at) : Expr(ExprKind::Concat, at) {}
    std::vector<ExprPtr> parts;
};

// a < b <= c: Python's chained comparison.
struct CompareExpr : Expr {
    CompareExpr(SourcePos at, ExprPtr head) : Expr(ExprKind::Compare, at), first(std::move(head)) {}
    ExprPtr first;
    std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct ConditionalExpr : Expr {
    explicit ConditionalExpr(SourcePos at) : Expr(ExprKind::Conditional, at) {}
    ExprPtr condition;
    ExprPtr then_value;
    ExprPtr else_value;  // null: undefined when the condition is false
};

// ---- statements ----

// Where {% set %} and {% for %} store: a name, a (nested) tuple of targets, or ns.attr.
struct Target {
    enum class Kind { Name, Tuple, NamespaceAttribute };
    Kind kind = Kind::Name;
    std::string name;       // Name, or the namespace variable
    std::string attribute;  // NamespaceAttribute
    std::vector<Target> items;
    SourcePos pos;
};

enum class StmtKind {
    Text,
    Output,
    If,
    For,
    Set,
    BlockSet,
    Macro,
    CallBlock,
    FilterBlock,
    With,
    Break,
    Continue,
    Scope,  // {% block %} and {% generation %}: a body run in its own scope
};

struct Stmt {
    Stmt(StmtKind node_kind, SourcePos at) : kind(node_kind), pos(at) {}
    virtual ~Stmt() = default;
    StmtKind kind;
    SourcePos pos;
};
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct TextStmt : Stmt {
    TextStmt(SourcePos at, std::string data) : Stmt(StmtKind::Text, at), text(std::move(data)) {}
    std::string text;
};

struct OutputStmt : Stmt {
    OutputStmt(SourcePos at, ExprPtr expr) : Stmt(StmtKind::Output, at), value(std::move(expr)) {}
    ExprPtr value;
};

struct IfStmt : Stmt {
    explicit IfStmt(SourcePos at) : Stmt(StmtKind::If, at) {}
    std::vector<std::pair<ExprPtr, Body>> branches;  // if, then each elif
    Body else_body;
};

struct ForStmt : Stmt {
    explicit ForStmt(SourcePos at) : Stmt(StmtKind::For, at) {}
    Target target;
    ExprPtr iterable;
    ExprPtr filter;  // {% for x in xs if cond %}
    bool recursive = false;
    Body body;
    Body else_body;
};

struct SetStmt : Stmt {
    explicit SetStmt(SourcePos at) : Stmt(StmtKind::Set, at) {}
    Target target;
    ExprPtr value;
};

// {% set x | filters %}...{% endset %}
struct BlockSetStmt : Stmt {
    explicit BlockSetStmt(SourcePos at) : Stmt(StmtKind::BlockSet, at) {}
    Target target;
    ExprPtr filter;  // FilterExpr chain whose innermost operand is null, or null
    Body body;
};

struct MacroDefinition {
    std::string name;
    std::vector<std::string> params;
    std::vector<ExprPtr> defaults;  // for the last defaults.size() params
    Body body;
    // Whether the body reads these names, which decides what extra arguments it accepts.
    bool uses_caller = false;
    bool uses_varargs = false;
    bool uses_kwargs = false;
    SourcePos pos;
};

struct MacroStmt : Stmt {
    explicit MacroStmt(SourcePos at) : Stmt(StmtKind::Macro, at) {}
    MacroDefinition macro;
};

// {% call(params) callee(args) %}body{% endcall %}: callee gets the body as `caller`.
struct CallBlockStmt : Stmt {
    explicit CallBlockStmt(SourcePos at) : Stmt(StmtKind::CallBlock, at) {}
    MacroDefinition caller;
    ExprPtr call;  // a CallExpr
};

struct FilterBlockStmt : Stmt {
    explicit FilterBlockStmt(SourcePos at) : Stmt(StmtKind::FilterBlock, at) {}
    ExprPtr filter;  // FilterExpr chain whose innermost operand is null
    Body body;
};

struct WithStmt : Stmt {
    explicit WithStmt(SourcePos at) : Stmt(StmtKind::With, at) {}
    std::vector<std::pair<Target, ExprPtr>> assignments;
    Body body;
};

struct ScopeStmt : Stmt {
    explicit ScopeStmt(SourcePos at) : Stmt(StmtKind::Scope, at) {}
    bool is_named_block = false;  // {% block %} rather than {% generation %}
    // A {% block %} without `scoped` sees only the template's top-level variables.
    bool sees_locals = true;
    Body body;
};

}  // namespace cherenkov::text::jinja
