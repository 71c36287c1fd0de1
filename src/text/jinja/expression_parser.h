// Jinja2's expression grammar (jinja2/parser.py, parse_expression and below): conditional
// expressions, boolean and comparison operators, arithmetic with `~`, filters, tests, calls,
// attribute/item/slice postfixes and literals, with the same precedence quirks.
#pragma once

#include <initializer_list>
#include <string_view>

#include "text/jinja/ast.h"
#include "text/jinja/token_stream.h"

namespace cherenkov::text::jinja {

class ExpressionParser {
public:
    explicit ExpressionParser(TokenStream& stream) : stream_(stream) {}

    ExprPtr parse_expression(bool with_condexpr = true);
    // Comma-separated expressions form a tuple; `extra_end_names` are names that end it.
    ExprPtr parse_tuple(bool with_condexpr = true,
                        std::initializer_list<std::string_view> extra_end_names = {},
                        bool explicit_parentheses = false);
    // A chain of `| name(args)` applied to `operand` (null for filter blocks); with
    // `start_inline` the first filter has no leading `|`.
    ExprPtr parse_filter(ExprPtr operand, bool start_inline);
    void parse_call_args(CallArguments& out);
    bool is_tuple_end(std::initializer_list<std::string_view> extra_end_names) const;

private:
    ExprPtr parse_condexpr();
    ExprPtr parse_or();
    ExprPtr parse_and();
    ExprPtr parse_not();
    ExprPtr parse_compare();
    ExprPtr parse_math1();
    ExprPtr parse_concat();
    ExprPtr parse_math2();
    ExprPtr parse_pow();
    ExprPtr parse_unary(bool with_filter = true);
    ExprPtr parse_primary();
    ExprPtr parse_list();
    ExprPtr parse_dict();
    ExprPtr parse_postfix(ExprPtr node);
    ExprPtr parse_filter_expr(ExprPtr node);
    ExprPtr parse_subscript(ExprPtr node);
    ExprPtr parse_call(ExprPtr callee);
    ExprPtr parse_test(ExprPtr node);
    std::string parse_dotted_name();

    TokenStream& stream_;
};

}  // namespace cherenkov::text::jinja
