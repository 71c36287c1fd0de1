// Executes a parsed template once: statements in renderer.cpp, expressions in
// expression_evaluator.cpp, macros and loops through the objects in callables.h. One Renderer
// per render call; it owns the output buffers, the step and depth budgets and every object the
// render creates.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "text/jinja/ast.h"
#include "text/jinja/limits.h"
#include "text/jinja/scope.h"
#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

class Namespace;

class Renderer {
public:
    Renderer(const std::string& template_name, const RenderLimits& limits);
    ~Renderer();
    Renderer(const Renderer&) = delete;
    Renderer& operator=(const Renderer&) = delete;

    // Renders `body` with `context` as the top-level variables. Errors name the template and
    // the line and column being executed, except raise_exception(), whose message is kept as is.
    std::string render(const Body& body, const Dict& context);

    const RenderLimits& limits() const { return limits_; }
    const std::string& template_name() const { return template_name_; }
    // Counts one unit of work (loop iteration, statement, call); throws past max_steps.
    void count_step();

    // Filters and tests by name, for filters such as map and select that take their names.
    Value apply_filter(std::string_view name, const Value& value, CallArgs& args);
    bool apply_test(std::string_view name, const Value& value, CallArgs& args);

    // Runs a macro (or a call block's caller) defined in `closure`.
    Value call_macro(const MacroDefinition& macro, const ScopePtr& closure, CallArgs& args);
    // Runs a recursive loop's body again over `iterable` (the `loop(...)` call).
    Value call_loop(const ForStmt& loop, const ScopePtr& scope, const Value& iterable, int depth);
    // Registers a namespace so that its attributes are dropped when the render ends, which
    // breaks any reference cycle a template built through it.
    void adopt(const std::shared_ptr<Namespace>& ns);
    // raise_exception(): ends the render with `message` verbatim (no location prefix).
    [[noreturn]] void raise_from_template(const std::string& message);

private:
    enum class Flow { Normal, Break, Continue };

    Flow execute(const Body& body, const ScopePtr& scope);
    Flow execute_stmt(const Stmt& stmt, const ScopePtr& scope);
    void execute_for(const ForStmt& loop, const ScopePtr& scope, const Value& iterable, int depth);
    void assign(const Target& target, Value value, const ScopePtr& scope);
    void define_macro(const MacroStmt& stmt, const ScopePtr& scope);
    void execute_call_block(const CallBlockStmt& stmt, const ScopePtr& scope);
    // Runs `body` in `scope` and returns what it printed; `flow` receives a break/continue.
    std::string capture(const Body& body, const ScopePtr& scope, Flow* flow = nullptr);
    void write(std::string_view text);

    Value evaluate(const Expr& expr, const ScopePtr& scope);
    Value evaluate_node(const Expr& expr, const ScopePtr& scope);
    Value lookup(const std::string& name, const ScopePtr& scope);
    Value evaluate_call(const CallExpr& call, const ScopePtr& scope,
                        std::optional<Value> caller = std::nullopt);
    CallArgs evaluate_args(const CallArguments& args, const ScopePtr& scope);
    // `block_output` is the captured body of a filter block or block set, which the innermost
    // filter of the chain takes as its operand.
    Value evaluate_filter(const FilterExpr& filter, const ScopePtr& scope,
                          const Value* block_output);
    Value evaluate_filter_operand(const FilterExpr& filter, const ScopePtr& scope,
                                  const Value* block_output);
    Value evaluate_compare(const CompareExpr& compare, const ScopePtr& scope);
    Value evaluate_concat(const ConcatExpr& concat, const ScopePtr& scope);
    Value evaluate_collection(const Expr& expr, const ScopePtr& scope);

    // Marks where execution is, for the location of an error thrown from here on.
    void at(SourcePos pos) { pos_ = pos; }

    // Bounds the C++ recursion of execute/evaluate: frames are small, but ASan builds and deep
    // macro recursion multiply them. CPython's own recursion limit is 1000.
    static constexpr int kMaxEvalDepth = 1000;
    class NestingGuard {
    public:
        explicit NestingGuard(Renderer& renderer) : renderer_(renderer) {
            if (++renderer_.eval_depth_ > kMaxEvalDepth) {
                --renderer_.eval_depth_;
                throw Error(ErrorKind::ResourceExhausted, "maximum recursion depth exceeded");
            }
        }
        ~NestingGuard() { --renderer_.eval_depth_; }
        NestingGuard(const NestingGuard&) = delete;
        NestingGuard& operator=(const NestingGuard&) = delete;

    private:
        Renderer& renderer_;
    };

    std::string template_name_;
    RenderLimits limits_;
    std::string* out_ = nullptr;
    ScopePtr root_;
    SourcePos pos_;
    uint64_t n_steps_ = 0;
    int call_depth_ = 0;
    int eval_depth_ = 0;
    bool error_located_ = false;
    std::vector<std::weak_ptr<Namespace>> namespaces_;
    std::vector<ScopePtr> pinned_scopes_;  // scopes macros and loops were defined in
};

}  // namespace cherenkov::text::jinja
