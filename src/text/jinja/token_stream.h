// The parser's view of the token list: a cursor with Jinja2's TokenStream helpers, plus the
// parse state the expression and statement parsers share (nesting depth, enclosing loops).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/lexer.h"
#include "text/jinja/limits.h"

namespace cherenkov::text::jinja {

class TokenStream {
public:
    TokenStream(std::vector<Token> tokens, std::string template_name)
        : tokens_(std::move(tokens)), name_(std::move(template_name)) {}

    const Token& current() const { return tokens_[pos_]; }
    const Token& look() const { return tokens_[pos_ + 1 < tokens_.size() ? pos_ + 1 : pos_]; }
    // Returns the current token and advances (never past Eof).
    const Token& next() {
        const Token& token = tokens_[pos_];
        if (pos_ + 1 < tokens_.size()) ++pos_;
        return token;
    }
    void skip(int n) {
        for (int step = 0; step < n; ++step) next();
    }

    bool is_operator(std::string_view op) const {
        return current().type == TokenType::Operator && current().text == op;
    }
    bool is_name(std::string_view name) const {
        return current().type == TokenType::Name && current().text == name;
    }
    bool skip_operator(std::string_view op) {
        if (!is_operator(op)) return false;
        next();
        return true;
    }
    bool skip_name(std::string_view name) {
        if (!is_name(name)) return false;
        next();
        return true;
    }

    const Token& expect_operator(std::string_view op) {
        if (!is_operator(op))
            fail("expected token '" + std::string(op) + "', got '" + describe_token(current()) +
                 "'");
        return next();
    }
    const Token& expect_type(TokenType type, std::string_view what) {
        if (current().type != type)
            fail("expected " + std::string(what) + ", got '" + describe_token(current()) + "'");
        return next();
    }
    const Token& expect_name(std::string_view name) {
        if (!is_name(name))
            fail("expected token '" + std::string(name) + "', got '" + describe_token(current()) +
                 "'");
        return next();
    }

    [[noreturn]] void fail(const std::string& message) const { fail_at(current().pos, message); }
    [[noreturn]] void fail_at(SourcePos pos, const std::string& message) const {
        throw_template_error(name_, pos, message);
    }
    const std::string& template_name() const { return name_; }

    // Nesting guard for recursive descent: deeper than kMaxParseDepth fails at `pos`.
    void enter(SourcePos pos) {
        if (++depth_ > kMaxParseDepth) {
            fail_at(pos, "nesting deeper than " + std::to_string(kMaxParseDepth) + " levels");
        }
    }
    void leave() { --depth_; }

    // Loops enclosing the current statement within its function (macro bodies start at 0).
    int loop_depth = 0;

private:
    std::vector<Token> tokens_;
    std::string name_;
    size_t pos_ = 0;
    int depth_ = 0;
};

class DepthGuard {
public:
    DepthGuard(TokenStream& stream, SourcePos pos) : stream_(stream) { stream_.enter(pos); }
    ~DepthGuard() { stream_.leave(); }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

private:
    TokenStream& stream_;
};

}  // namespace cherenkov::text::jinja
