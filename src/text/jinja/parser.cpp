// Statement parsing (jinja2/parser.py: subparse, parse_statement and the parse_<tag> methods)
// plus the checks Jinja2's compiler makes: unknown filters and tests outside {% if %} and
// conditional expressions, break/continue outside loops.
#include "text/jinja/parser.h"

#include <set>

#include "text/jinja/ast_walk.h"
#include "text/jinja/expression_parser.h"
#include "text/jinja/filters.h"
#include "text/jinja/tests.h"

namespace cherenkov::text::jinja {

namespace {

class StatementParser {
public:
    explicit StatementParser(TokenStream& stream) : stream_(stream), expressions_(stream) {}

    Body parse() {
        Body body = subparse({});
        check_filters_and_tests(body);
        return body;
    }

private:
    struct OpenTag {
        std::string name;
        std::vector<std::string> end_names;
    };

    std::string looking_for() const {
        if (open_tags_.empty()) return "";
        const auto& open = open_tags_.back();
        std::string names;
        for (size_t index = 0; index < open.end_names.size(); ++index) {
            if (index > 0) names += " or ";
            names += "'" + open.end_names[index] + "'";
        }
        return " Jinja was looking for the following tags: " + names +
               ". The innermost block that needs to be closed is '" + open.name + "'.";
    }

    Body subparse(const std::vector<std::string>& end_names) {
        Body body;
        while (stream_.current().type != TokenType::Eof) {
            const Token& token = stream_.current();
            if (token.type == TokenType::Data) {
                body.push_back(std::make_unique<TextStmt>(token.pos, token.text));
                stream_.next();
            } else if (token.type == TokenType::VariableBegin) {
                SourcePos pos = stream_.next().pos;
                body.push_back(std::make_unique<OutputStmt>(pos, expressions_.parse_tuple()));
                stream_.expect_type(TokenType::VariableEnd, "end of print statement");
            } else if (token.type == TokenType::BlockBegin) {
                stream_.next();
                for (const auto& name : end_names) {
                    if (stream_.is_name(name)) return body;
                }
                for (auto& stmt : parse_statement()) body.push_back(std::move(stmt));
                stream_.expect_type(TokenType::BlockEnd, "end of statement block");
            } else {
                stream_.fail("unexpected '" + describe_token(token) + "'");
            }
        }
        return body;
    }

    // Jinja2's parse_statements: `%}`, the body, and (with drop_needle) the end tag's name.
    Body parse_statements(const std::string& tag, const std::vector<std::string>& end_names,
                          bool drop_needle) {
        stream_.skip_operator(":");
        stream_.expect_type(TokenType::BlockEnd, "end of statement block");
        open_tags_.push_back({tag, end_names});
        Body body = subparse(end_names);
        if (stream_.current().type == TokenType::Eof) {
            stream_.fail("Unexpected end of template." + looking_for());
        }
        open_tags_.pop_back();
        if (drop_needle) stream_.next();
        return body;
    }

    Body parse_statement() {
        const Token& token = stream_.current();
        if (token.type != TokenType::Name) stream_.fail("tag name expected");
        const std::string tag = token.text;
        SourcePos pos = token.pos;
        DepthGuard guard(stream_, pos);
        Body out;
        if (tag == "for") {
            out.push_back(parse_for());
        } else if (tag == "if") {
            out.push_back(parse_if());
        } else if (tag == "set") {
            out.push_back(parse_set());
        } else if (tag == "macro") {
            out.push_back(parse_macro());
        } else if (tag == "call") {
            out.push_back(parse_call_block());
        } else if (tag == "filter") {
            out.push_back(parse_filter_block());
        } else if (tag == "with") {
            out.push_back(parse_with());
        } else if (tag == "block") {
            out.push_back(parse_block());
        } else if (tag == "generation") {
            out.push_back(parse_generation());
        } else if (tag == "print") {
            stream_.next();
            while (stream_.current().type != TokenType::BlockEnd) {
                if (!out.empty()) stream_.expect_operator(",");
                SourcePos at = stream_.current().pos;
                out.push_back(std::make_unique<OutputStmt>(at, expressions_.parse_expression()));
            }
        } else if (tag == "break" || tag == "continue") {
            stream_.next();
            if (stream_.loop_depth == 0) stream_.fail_at(pos, "'" + tag + "' outside loop");
            out.push_back(
                std::make_unique<Stmt>(tag == "break" ? StmtKind::Break : StmtKind::Continue, pos));
        } else if (tag == "extends" || tag == "include" || tag == "import" || tag == "from") {
            stream_.fail("the '" + tag +
                         "' tag is not supported: templates are rendered without a loader");
        } else if (tag == "autoescape") {
            stream_.fail("the 'autoescape' tag is not supported");
        } else {
            stream_.fail("Encountered unknown tag '" + tag + "'." + looking_for());
        }
        return out;
    }

    StmtPtr parse_for() {
        auto loop = std::make_unique<ForStmt>(stream_.next().pos);
        loop->target = parse_target(true, false, {"in"}, false);
        stream_.expect_name("in");
        loop->iterable = expressions_.parse_tuple(false, {"recursive"});
        if (stream_.skip_name("if")) loop->filter = expressions_.parse_expression();
        loop->recursive = stream_.skip_name("recursive");
        ++stream_.loop_depth;
        loop->body = parse_statements("for", {"endfor", "else"}, false);
        --stream_.loop_depth;
        if (stream_.next().text == "else")
            loop->else_body = parse_statements("for", {"endfor"}, true);
        return loop;
    }

    StmtPtr parse_if() {
        auto node = std::make_unique<IfStmt>(stream_.next().pos);
        while (true) {
            ExprPtr condition = expressions_.parse_tuple(false);
            Body body = parse_statements("if", {"elif", "else", "endif"}, false);
            node->branches.emplace_back(std::move(condition), std::move(body));
            const Token& token = stream_.next();
            if (token.text == "elif") continue;
            if (token.text == "else") node->else_body = parse_statements("if", {"endif"}, true);
            return node;
        }
    }

    StmtPtr parse_set() {
        SourcePos pos = stream_.next().pos;
        Target target = parse_target(true, false, {}, true);
        if (stream_.skip_operator("=")) {
            auto set = std::make_unique<SetStmt>(pos);
            set->target = std::move(target);
            set->value = expressions_.parse_tuple();
            return set;
        }
        auto set = std::make_unique<BlockSetStmt>(pos);
        set->target = std::move(target);
        if (stream_.is_operator("|")) set->filter = expressions_.parse_filter(nullptr, false);
        set->body = parse_statements("set", {"endset"}, true);
        return set;
    }

    void parse_signature(MacroDefinition& macro) {
        stream_.expect_operator("(");
        while (!stream_.is_operator(")")) {
            if (!macro.params.empty()) stream_.expect_operator(",");
            macro.params.push_back(parse_target(false, true, {}, false).name);
            if (stream_.skip_operator("=")) {
                macro.defaults.push_back(expressions_.parse_expression());
            } else if (!macro.defaults.empty()) {
                stream_.fail("non-default argument follows default argument");
            }
        }
        stream_.expect_operator(")");
    }

    // A macro or caller body is its own function: loops outside it do not enclose it.
    void parse_macro_body(MacroDefinition& macro, const std::string& tag,
                          const std::string& end_name) {
        int saved_loops = stream_.loop_depth;
        stream_.loop_depth = 0;
        macro.body = parse_statements(tag, {end_name}, true);
        stream_.loop_depth = saved_loops;
        walk_body(macro.body, false, false, [&](const Expr& expr, bool) {
            if (expr.kind != ExprKind::Name) return;
            const auto& name = static_cast<const NameExpr&>(expr).name;
            macro.uses_caller |= name == "caller";
            macro.uses_varargs |= name == "varargs";
            macro.uses_kwargs |= name == "kwargs";
        });
    }

    StmtPtr parse_macro() {
        auto node = std::make_unique<MacroStmt>(stream_.next().pos);
        node->macro.pos = node->pos;
        node->macro.name = parse_target(false, true, {}, false).name;
        parse_signature(node->macro);
        parse_macro_body(node->macro, "macro", "endmacro");
        return node;
    }

    StmtPtr parse_call_block() {
        auto node = std::make_unique<CallBlockStmt>(stream_.next().pos);
        node->caller.name = "caller";
        node->caller.pos = node->pos;
        if (stream_.is_operator("(")) parse_signature(node->caller);
        node->call = expressions_.parse_expression();
        if (node->call->kind != ExprKind::Call) stream_.fail_at(node->pos, "expected call");
        parse_macro_body(node->caller, "call", "endcall");
        return node;
    }

    StmtPtr parse_filter_block() {
        auto node = std::make_unique<FilterBlockStmt>(stream_.next().pos);
        node->filter = expressions_.parse_filter(nullptr, true);
        node->body = parse_statements("filter", {"endfilter"}, true);
        return node;
    }

    StmtPtr parse_with() {
        auto node = std::make_unique<WithStmt>(stream_.next().pos);
        while (stream_.current().type != TokenType::BlockEnd) {
            if (!node->assignments.empty()) stream_.expect_operator(",");
            Target target = parse_target(true, false, {}, false);
            stream_.expect_operator("=");
            node->assignments.emplace_back(std::move(target), expressions_.parse_expression());
        }
        node->body = parse_statements("with", {"endwith"}, true);
        return node;
    }

    StmtPtr parse_block() {
        auto node = std::make_unique<ScopeStmt>(stream_.next().pos);
        node->is_named_block = true;
        std::string name = stream_.expect_type(TokenType::Name, "block name").text;
        if (!block_names_.insert(name).second)
            stream_.fail_at(node->pos, "block '" + name + "' defined twice");
        node->sees_locals = stream_.skip_name("scoped");
        stream_.skip_name("required");
        int saved_loops = stream_.loop_depth;
        stream_.loop_depth = 0;
        node->body = parse_statements("block", {"endblock"}, true);
        stream_.loop_depth = saved_loops;
        stream_.skip_name(name);
        return node;
    }

    StmtPtr parse_generation() {
        auto node = std::make_unique<ScopeStmt>(stream_.next().pos);
        int saved_loops = stream_.loop_depth;
        stream_.loop_depth = 0;
        node->body = parse_statements("generation", {"endgeneration"}, true);
        stream_.loop_depth = saved_loops;
        return node;
    }

    // Jinja2's parse_assign_target.
    Target parse_target(bool with_tuple, bool name_only,
                        std::initializer_list<std::string_view> extra_end_names,
                        bool with_namespace) {
        SourcePos pos = stream_.current().pos;
        if (name_only || !with_tuple) {
            Target target = parse_target_item(with_namespace && !name_only);
            if (name_only && target.kind != Target::Kind::Name)
                stream_.fail_at(pos, "expected name");
            return target;
        }
        Target first = parse_target_item(with_namespace);
        if (!stream_.is_operator(",")) return first;
        Target tuple;
        tuple.kind = Target::Kind::Tuple;
        tuple.pos = pos;
        tuple.items.push_back(std::move(first));
        while (stream_.skip_operator(",")) {
            if (expressions_.is_tuple_end(extra_end_names)) break;
            tuple.items.push_back(parse_target_item(with_namespace));
        }
        return tuple;
    }

    Target parse_target_item(bool with_namespace) {
        Target target;
        target.pos = stream_.current().pos;
        if (stream_.current().type == TokenType::Name) {
            target.name = stream_.next().text;
            static const char* kConstants[] = {"true", "false", "none", "True", "False", "None"};
            for (const char* constant : kConstants) {
                if (target.name == constant) stream_.fail_at(target.pos, "can't assign to 'const'");
            }
            if (with_namespace && stream_.skip_operator(".")) {
                target.kind = Target::Kind::NamespaceAttribute;
                target.attribute = stream_.expect_type(TokenType::Name, "name").text;
            }
            return target;
        }
        if (stream_.skip_operator("(")) {
            DepthGuard guard(stream_, target.pos);
            target.kind = Target::Kind::Tuple;
            while (!stream_.is_operator(")")) {
                if (!target.items.empty()) stream_.expect_operator(",");
                if (stream_.is_operator(")")) break;
                target.items.push_back(parse_target_item(false));
            }
            stream_.expect_operator(")");
            return target;
        }
        stream_.fail("can't assign to '" + describe_token(stream_.current()) + "'");
    }

    // Jinja2's compiler rejects unknown filters and tests, except inside {% if %} and
    // conditional expressions, where they fail only if evaluated.
    void check_filters_and_tests(const Body& body) {
        walk_body(body, false, true, [&](const Expr& expr, bool soft) {
            if (soft || (expr.kind != ExprKind::Filter && expr.kind != ExprKind::Test)) return;
            const auto& filter = static_cast<const FilterExpr&>(expr);
            std::string problem = expr.kind == ExprKind::Filter ? filter_problem(filter.name)
                                                                : test_problem(filter.name);
            if (!problem.empty()) stream_.fail_at(expr.pos, problem);
        });
    }

    TokenStream& stream_;
    ExpressionParser expressions_;
    std::vector<OpenTag> open_tags_;
    std::set<std::string> block_names_;
};

}  // namespace

Body parse_template(std::vector<Token> tokens, const std::string& template_name) {
    TokenStream stream(std::move(tokens), template_name);
    return StatementParser(stream).parse();
}

}  // namespace cherenkov::text::jinja
