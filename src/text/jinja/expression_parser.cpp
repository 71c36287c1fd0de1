// Recursive descent over Jinja2's expression grammar; each function matches the Parser method
// of the same name in jinja2/parser.py.
#include "text/jinja/expression_parser.h"

namespace cherenkov::text::jinja {

namespace {

std::optional<CompareOp> compare_op(const Token& token) {
    if (token.type != TokenType::Operator) return std::nullopt;
    if (token.text == "==") return CompareOp::Eq;
    if (token.text == "!=") return CompareOp::Ne;
    if (token.text == "<") return CompareOp::Lt;
    if (token.text == "<=") return CompareOp::Le;
    if (token.text == ">") return CompareOp::Gt;
    if (token.text == ">=") return CompareOp::Ge;
    return std::nullopt;
}

}  // namespace

bool ExpressionParser::is_tuple_end(std::initializer_list<std::string_view> extra_end_names) const {
    const Token& token = stream_.current();
    if (token.type == TokenType::VariableEnd || token.type == TokenType::BlockEnd ||
        stream_.is_operator(")")) {
        return true;
    }
    for (auto name : extra_end_names) {
        if (stream_.is_name(name)) return true;
    }
    return false;
}

ExprPtr ExpressionParser::parse_expression(bool with_condexpr) {
    return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr ExpressionParser::parse_tuple(bool with_condexpr,
                                      std::initializer_list<std::string_view> extra_end_names,
                                      bool explicit_parentheses) {
    SourcePos pos = stream_.current().pos;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
        if (!items.empty()) stream_.expect_operator(",");
        if (is_tuple_end(extra_end_names)) break;
        items.push_back(parse_expression(with_condexpr));
        if (!stream_.is_operator(",")) break;
        is_tuple = true;
    }
    if (!is_tuple) {
        if (!items.empty()) return std::move(items[0]);
        if (!explicit_parentheses) {
            stream_.fail("Expected an expression, got '" + describe_token(stream_.current()) + "'");
        }
    }
    auto tuple = std::make_unique<ListExpr>(pos, true);
    tuple->items = std::move(items);
    return tuple;
}

ExprPtr ExpressionParser::parse_condexpr() {
    DepthGuard guard(stream_, stream_.current().pos);
    SourcePos pos = stream_.current().pos;
    ExprPtr expr = parse_or();
    while (stream_.skip_name("if")) {
        auto conditional = std::make_unique<ConditionalExpr>(pos);
        conditional->condition = parse_or();
        if (stream_.skip_name("else")) conditional->else_value = parse_condexpr();
        conditional->then_value = std::move(expr);
        expr = std::move(conditional);
        pos = stream_.current().pos;
    }
    return expr;
}

ExprPtr ExpressionParser::parse_or() {
    SourcePos pos = stream_.current().pos;
    ExprPtr left = parse_and();
    while (stream_.skip_name("or")) {
        left = std::make_unique<LogicalExpr>(ExprKind::Or, pos, std::move(left), parse_and());
        pos = stream_.current().pos;
    }
    return left;
}

ExprPtr ExpressionParser::parse_and() {
    SourcePos pos = stream_.current().pos;
    ExprPtr left = parse_not();
    while (stream_.skip_name("and")) {
        left = std::make_unique<LogicalExpr>(ExprKind::And, pos, std::move(left), parse_not());
        pos = stream_.current().pos;
    }
    return left;
}

ExprPtr ExpressionParser::parse_not() {
    if (stream_.is_name("not")) {
        SourcePos pos = stream_.next().pos;
        DepthGuard guard(stream_, pos);
        return std::make_unique<UnaryExpr>(ExprKind::Not, pos, parse_not());
    }
    return parse_compare();
}

ExprPtr ExpressionParser::parse_compare() {
    SourcePos pos = stream_.current().pos;
    ExprPtr first = parse_math1();
    std::vector<std::pair<CompareOp, ExprPtr>> rest;
    while (true) {
        if (auto op = compare_op(stream_.current())) {
            stream_.next();
            rest.emplace_back(*op, parse_math1());
        } else if (stream_.skip_name("in")) {
            rest.emplace_back(CompareOp::In, parse_math1());
        } else if (stream_.is_name("not") && stream_.look().type == TokenType::Name &&
                   stream_.look().text == "in") {
            stream_.skip(2);
            rest.emplace_back(CompareOp::NotIn, parse_math1());
        } else {
            break;
        }
    }
    if (rest.empty()) return first;
    auto compare = std::make_unique<CompareExpr>(pos, std::move(first));
    compare->rest = std::move(rest);
    return compare;
}

ExprPtr ExpressionParser::parse_math1() {
    SourcePos pos = stream_.current().pos;
    ExprPtr left = parse_concat();
    while (stream_.is_operator("+") || stream_.is_operator("-")) {
        BinaryOp op = stream_.next().text == "+" ? BinaryOp::Add : BinaryOp::Sub;
        left = std::make_unique<BinaryExpr>(pos, op, std::move(left), parse_concat());
        pos = stream_.current().pos;
    }
    return left;
}

ExprPtr ExpressionParser::parse_concat() {
    SourcePos pos = stream_.current().pos;
    ExprPtr first = parse_math2();
    if (!stream_.is_operator("~")) return first;
    auto concat = std::make_unique<ConcatExpr>(pos);
    concat->parts.push_back(std::move(first));
    while (stream_.skip_operator("~")) concat->parts.push_back(parse_math2());
    return concat;
}

ExprPtr ExpressionParser::parse_math2() {
    SourcePos pos = stream_.current().pos;
    ExprPtr left = parse_pow();
    while (true) {
        BinaryOp op;
        if (stream_.is_operator("*")) {
            op = BinaryOp::Mul;
        } else if (stream_.is_operator("/")) {
            op = BinaryOp::Div;
        } else if (stream_.is_operator("//")) {
            op = BinaryOp::FloorDiv;
        } else if (stream_.is_operator("%")) {
            op = BinaryOp::Mod;
        } else {
            break;
        }
        stream_.next();
        left = std::make_unique<BinaryExpr>(pos, op, std::move(left), parse_pow());
        pos = stream_.current().pos;
    }
    return left;
}

ExprPtr ExpressionParser::parse_pow() {
    SourcePos pos = stream_.current().pos;
    ExprPtr left = parse_unary();
    while (stream_.skip_operator("**")) {
        left = std::make_unique<BinaryExpr>(pos, BinaryOp::Pow, std::move(left), parse_unary());
        pos = stream_.current().pos;
    }
    return left;
}

ExprPtr ExpressionParser::parse_unary(bool with_filter) {
    SourcePos pos = stream_.current().pos;
    DepthGuard guard(stream_, pos);
    ExprPtr node;
    if (stream_.skip_operator("-")) {
        node = std::make_unique<UnaryExpr>(ExprKind::Negate, pos, parse_unary(false));
    } else if (stream_.skip_operator("+")) {
        node = std::make_unique<UnaryExpr>(ExprKind::Plus, pos, parse_unary(false));
    } else {
        node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
}

ExprPtr ExpressionParser::parse_primary() {
    const Token& token = stream_.current();
    SourcePos pos = token.pos;
    switch (token.type) {
        case TokenType::Name: {
            std::string name = stream_.next().text;
            if (name == "true" || name == "True")
                return std::make_unique<LiteralExpr>(pos, Value::boolean(true));
            if (name == "false" || name == "False")
                return std::make_unique<LiteralExpr>(pos, Value::boolean(false));
            if (name == "none" || name == "None")
                return std::make_unique<LiteralExpr>(pos, Value::none());
            return std::make_unique<NameExpr>(pos, std::move(name));
        }
        case TokenType::String: {
            std::string text;
            while (stream_.current().type == TokenType::String) text += stream_.next().text;
            return std::make_unique<LiteralExpr>(pos, Value::string(std::move(text)));
        }
        case TokenType::Integer:
            return std::make_unique<LiteralExpr>(pos, Value::integer(stream_.next().integer));
        case TokenType::Float:
            return std::make_unique<LiteralExpr>(pos, Value::floating(stream_.next().floating));
        default: break;
    }
    if (stream_.skip_operator("(")) {
        ExprPtr node = parse_tuple(true, {}, true);
        stream_.expect_operator(")");
        return node;
    }
    if (stream_.is_operator("[")) return parse_list();
    if (stream_.is_operator("{")) return parse_dict();
    stream_.fail("unexpected '" + describe_token(token) + "'");
}

ExprPtr ExpressionParser::parse_list() {
    auto list = std::make_unique<ListExpr>(stream_.expect_operator("[").pos, false);
    while (!stream_.is_operator("]")) {
        if (!list->items.empty()) stream_.expect_operator(",");
        if (stream_.is_operator("]")) break;
        list->items.push_back(parse_expression());
    }
    stream_.expect_operator("]");
    return list;
}

ExprPtr ExpressionParser::parse_dict() {
    auto dict = std::make_unique<DictExpr>(stream_.expect_operator("{").pos);
    while (!stream_.is_operator("}")) {
        if (!dict->items.empty()) stream_.expect_operator(",");
        if (stream_.is_operator("}")) break;
        ExprPtr key = parse_expression();
        stream_.expect_operator(":");
        dict->items.emplace_back(std::move(key), parse_expression());
    }
    stream_.expect_operator("}");
    return dict;
}

ExprPtr ExpressionParser::parse_postfix(ExprPtr node) {
    while (true) {
        if (stream_.is_operator(".") || stream_.is_operator("[")) {
            node = parse_subscript(std::move(node));
        } else if (stream_.is_operator("(")) {
            node = parse_call(std::move(node));
        } else {
            return node;
        }
    }
}

ExprPtr ExpressionParser::parse_filter_expr(ExprPtr node) {
    while (true) {
        if (stream_.is_operator("|")) {
            node = parse_filter(std::move(node), false);
        } else if (stream_.is_name("is")) {
            node = parse_test(std::move(node));
        } else if (stream_.is_operator("(")) {
            node = parse_call(std::move(node));
        } else {
            return node;
        }
    }
}

ExprPtr ExpressionParser::parse_subscript(ExprPtr node) {
    const Token& token = stream_.next();
    SourcePos pos = token.pos;
    if (token.text == ".") {
        const Token& attribute = stream_.next();
        if (attribute.type == TokenType::Name) {
            return std::make_unique<AttributeExpr>(pos, std::move(node), attribute.text);
        }
        if (attribute.type != TokenType::Integer)
            stream_.fail_at(attribute.pos, "expected name or number");
        return std::make_unique<ItemExpr>(
            pos, std::move(node),
            std::make_unique<LiteralExpr>(attribute.pos, Value::integer(attribute.integer)));
    }
    // `[`: one subscript (an expression or a slice) or a tuple of them.
    std::vector<ExprPtr> keys;
    std::unique_ptr<SliceExpr> slice;
    while (!stream_.is_operator("]")) {
        if (!keys.empty() || slice) stream_.expect_operator(",");
        SourcePos key_pos = stream_.current().pos;
        ExprPtr start;
        if (!stream_.is_operator(":")) {
            start = parse_expression();
            if (!stream_.is_operator(":")) {
                if (slice) stream_.fail_at(key_pos, "tuples of slices are not supported");
                keys.push_back(std::move(start));
                continue;
            }
        }
        if (slice || !keys.empty()) stream_.fail_at(key_pos, "tuples of slices are not supported");
        stream_.next();  // the first ':'
        slice = std::make_unique<SliceExpr>(key_pos);
        slice->start = std::move(start);
        if (!stream_.is_operator(":") && !stream_.is_operator("]") && !stream_.is_operator(",")) {
            slice->stop = parse_expression();
        }
        if (stream_.skip_operator(":") && !stream_.is_operator("]") && !stream_.is_operator(",")) {
            slice->step = parse_expression();
        }
    }
    stream_.expect_operator("]");
    if (slice) {
        slice->object = std::move(node);
        slice->pos = pos;
        return slice;
    }
    if (keys.empty()) stream_.fail_at(pos, "expected subscript expression");
    if (keys.size() == 1)
        return std::make_unique<ItemExpr>(pos, std::move(node), std::move(keys[0]));
    auto tuple = std::make_unique<ListExpr>(pos, true);
    tuple->items = std::move(keys);
    return std::make_unique<ItemExpr>(pos, std::move(node), std::move(tuple));
}

void ExpressionParser::parse_call_args(CallArguments& out) {
    SourcePos pos = stream_.expect_operator("(").pos;
    auto ensure = [&](bool ok) {
        if (!ok) stream_.fail_at(pos, "invalid syntax for function call expression");
    };
    bool require_comma = false;
    while (!stream_.is_operator(")")) {
        if (require_comma) {
            stream_.expect_operator(",");
            if (stream_.is_operator(")")) break;
        }
        if (stream_.skip_operator("*")) {
            ensure(!out.star_args && !out.star_kwargs);
            out.star_args = parse_expression();
        } else if (stream_.skip_operator("**")) {
            ensure(!out.star_kwargs);
            out.star_kwargs = parse_expression();
        } else if (stream_.current().type == TokenType::Name &&
                   stream_.look().type == TokenType::Operator && stream_.look().text == "=") {
            ensure(!out.star_kwargs);
            std::string key = stream_.current().text;
            stream_.skip(2);
            out.keywords.emplace_back(std::move(key), parse_expression());
        } else {
            ensure(!out.star_args && !out.star_kwargs && out.keywords.empty());
            out.positional.push_back(parse_expression());
        }
        require_comma = true;
    }
    stream_.expect_operator(")");
}

ExprPtr ExpressionParser::parse_call(ExprPtr callee) {
    auto call = std::make_unique<CallExpr>(stream_.current().pos, std::move(callee));
    parse_call_args(call->args);
    return call;
}

std::string ExpressionParser::parse_dotted_name() {
    std::string name = stream_.expect_type(TokenType::Name, "name").text;
    while (stream_.skip_operator("."))
        name += "." + stream_.expect_type(TokenType::Name, "name").text;
    return name;
}

ExprPtr ExpressionParser::parse_filter(ExprPtr operand, bool start_inline) {
    while (stream_.is_operator("|") || start_inline) {
        if (!start_inline) stream_.next();
        start_inline = false;
        SourcePos pos = stream_.current().pos;
        std::string name = parse_dotted_name();
        auto filter = std::make_unique<FilterExpr>(ExprKind::Filter, pos, std::move(operand),
                                                   std::move(name));
        if (stream_.is_operator("(")) parse_call_args(filter->args);
        operand = std::move(filter);
    }
    return operand;
}

ExprPtr ExpressionParser::parse_test(ExprPtr node) {
    SourcePos pos = stream_.next().pos;  // `is`
    bool negated = stream_.skip_name("not");
    std::string name = parse_dotted_name();
    auto test = std::make_unique<FilterExpr>(ExprKind::Test, pos, std::move(node), std::move(name));
    const Token& token = stream_.current();
    bool argument_start = token.type == TokenType::Name || token.type == TokenType::String ||
                          token.type == TokenType::Integer || token.type == TokenType::Float ||
                          stream_.is_operator("[") || stream_.is_operator("{");
    if (stream_.is_operator("(")) {
        parse_call_args(test->args);
    } else if (argument_start && !stream_.is_name("else") && !stream_.is_name("or") &&
               !stream_.is_name("and")) {
        if (stream_.is_name("is")) stream_.fail("You cannot chain multiple tests with is");
        test->args.positional.push_back(parse_postfix(parse_primary()));
    }
    if (!negated) return test;
    return std::make_unique<UnaryExpr>(ExprKind::Not, pos, std::move(test));
}

}  // namespace cherenkov::text::jinja
