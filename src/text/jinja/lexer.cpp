// A hand-written equivalent of Jinja2's regex lexer (jinja2/lexer.py, tokeniter and wrap) for
// the default delimiters with trim_blocks=True, lstrip_blocks=True and
// keep_trailing_newline=False.
#include "text/jinja/lexer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "text/jinja/python_text.h"
#include "text/jinja/string_literal.h"

namespace cherenkov::text::jinja {

namespace {

enum class TagKind { Variable, Block, Comment, Raw };

bool is_ascii_digit(char c) {
    return c >= '0' && c <= '9';
}

class Lexer {
public:
    Lexer(std::string_view source, const std::string& name) : name_(name) {
        if (!is_valid_utf8(source))
            throw_template_error(name, SourcePos{}, "template is not valid UTF-8");
        normalize(source);
    }

    std::vector<Token> run() {
        while (pos_ < source_.size()) lex_root();
        Token eof;
        eof.type = TokenType::Eof;
        eof.pos = pos_at(source_.size());
        tokens_.push_back(eof);
        return std::move(tokens_);
    }

private:
    // \r\n and \r become \n; one trailing newline is dropped (keep_trailing_newline=False).
    void normalize(std::string_view source) {
        source_.reserve(source.size());
        for (size_t index = 0; index < source.size(); ++index) {
            char c = source[index];
            if (c == '\r') {
                if (index + 1 < source.size() && source[index + 1] == '\n') ++index;
                c = '\n';
            }
            source_ += c;
        }
        if (!source_.empty() && source_.back() == '\n') source_.pop_back();
        line_starts_.push_back(0);
        for (size_t index = 0; index < source_.size(); ++index) {
            if (source_[index] == '\n') line_starts_.push_back(index + 1);
        }
    }

    SourcePos pos_at(size_t offset) const {
        auto line = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset) - 1;
        SourcePos pos;
        pos.line = static_cast<int>(line - line_starts_.begin()) + 1;
        pos.column = static_cast<int>(count_code_points(
                         std::string_view(source_).substr(*line, offset - *line))) +
                     1;
        return pos;
    }

    [[noreturn]] void fail(size_t offset, const std::string& message) const {
        throw_template_error(name_, pos_at(offset), message);
    }

    bool starts_with(size_t offset, std::string_view text) const {
        return source_.compare(offset, text.size(), text) == 0;
    }

    // Length of the whitespace run (Python \s) at `offset`.
    size_t whitespace_at(size_t offset) const {
        size_t end = offset;
        while (end < source_.size()) {
            size_t next = end;
            char32_t c = next_code_point(next);
            if (!is_space(c)) break;
            end = next;
        }
        return end - offset;
    }

    char32_t next_code_point(size_t& offset) const {
        size_t end = offset + 1;
        while (end < source_.size() && (static_cast<unsigned char>(source_[end]) & 0xC0) == 0x80)
            ++end;
        auto decoded = decode_utf8(std::string_view(source_).substr(offset, end - offset));
        offset = end;
        return decoded.empty() ? 0 : decoded[0];
    }

    void push(TokenType type, size_t offset, std::string text) {
        Token token;
        token.type = type;
        token.text = std::move(text);
        token.pos = pos_at(offset);
        tokens_.push_back(std::move(token));
    }

    // Jinja2's OptionalLStrip: `-` strips all whitespace before a tag; otherwise lstrip_blocks
    // strips spaces between the line start and a block or comment tag.
    void push_text(size_t begin, size_t end, char sign, bool is_variable) {
        std::string_view text = std::string_view(source_).substr(begin, end - begin);
        if (sign == '-') {
            std::string stripped = py_strip(text, std::nullopt, StripSide::Right);
            text = text.substr(0, stripped.size());
        } else if (sign != '+' && !is_variable) {
            size_t line_start = text.rfind('\n');
            line_start = line_start == std::string_view::npos ? 0 : line_start + 1;
            if (line_start > 0 || line_starting_) {
                size_t n_space = whitespace_at(begin + line_start);
                if (n_space > 0 && line_start + n_space == text.size())
                    text = text.substr(0, line_start);
            }
        }
        if (!text.empty()) push(TokenType::Data, begin, std::string(text));
    }

    // `{% raw %}` at `offset`: sets `end` past the tag and `sign` to its whitespace control.
    bool match_raw_begin(size_t offset, size_t& end, char& sign) const {
        size_t at = offset + 2;
        sign = (at < source_.size() && (source_[at] == '-' || source_[at] == '+')) ? source_[at]
                                                                                   : '\0';
        if (sign != '\0') ++at;
        at += whitespace_at(at);
        if (!starts_with(at, "raw")) return false;
        at += 3;
        at += whitespace_at(at);
        if (starts_with(at, "-%}")) {
            at += 3;
            end = at + whitespace_at(at);
            return true;
        }
        if (starts_with(at, "%}")) {
            end = at + 2;
            return true;
        }
        return false;
    }

    void lex_root() {
        size_t tag = pos_;
        while (true) {
            tag = source_.find('{', tag);
            if (tag == std::string::npos || tag + 1 >= source_.size()) {
                push(TokenType::Data, pos_, source_.substr(pos_));
                pos_ = source_.size();
                return;
            }
            char next = source_[tag + 1];
            if (next == '{' || next == '%' || next == '#') break;
            ++tag;
        }
        char next = source_[tag + 1];
        size_t after = 0;
        char sign = '\0';
        TagKind kind =
            next == '{' ? TagKind::Variable : (next == '%' ? TagKind::Block : TagKind::Comment);
        if (kind == TagKind::Block && match_raw_begin(tag, after, sign)) {
            kind = TagKind::Raw;
        } else {
            after = tag + 2;
            if (after < source_.size() && (source_[after] == '-' || source_[after] == '+')) {
                sign = source_[after++];
            }
        }
        push_text(pos_, tag, sign, kind == TagKind::Variable);
        line_starting_ = source_[after - 1] == '\n';
        pos_ = after;
        switch (kind) {
            case TagKind::Variable:
                push(TokenType::VariableBegin, tag, "{{");
                lex_tag(false);
                break;
            case TagKind::Block:
                push(TokenType::BlockBegin, tag, "{%");
                lex_tag(true);
                break;
            case TagKind::Comment: lex_comment(tag); break;
            case TagKind::Raw: lex_raw(tag); break;
        }
    }

    // Consumes an end tag's trailing whitespace control and records whether it ended a line.
    void finish_end_tag(size_t end, char sign, bool trim_newline) {
        if (sign == '-') {
            end += whitespace_at(end);
        } else if (sign != '+' && trim_newline && end < source_.size() && source_[end] == '\n') {
            ++end;
        }
        line_starting_ = end > 0 && source_[end - 1] == '\n';
        pos_ = end;
    }

    void lex_comment(size_t begin) {
        size_t close = source_.find("#}", pos_);
        if (close == std::string::npos) fail(begin, "Missing end of comment tag");
        char sign = '\0';
        if (close > pos_ && (source_[close - 1] == '-' || source_[close - 1] == '+'))
            sign = source_[close - 1];
        finish_end_tag(close + 2, sign, true);
    }

    void lex_raw(size_t begin) {
        size_t content = pos_;
        size_t search = pos_;
        while (true) {
            size_t tag = source_.find("{%", search);
            if (tag == std::string::npos) fail(begin, "Missing end of raw directive");
            size_t at = tag + 2;
            char sign = (at < source_.size() && (source_[at] == '-' || source_[at] == '+'))
                            ? source_[at]
                            : '\0';
            if (sign != '\0') ++at;
            at += whitespace_at(at);
            if (starts_with(at, "endraw")) {
                at += 6;
                at += whitespace_at(at);
                char end_sign = '\0';
                if (at < source_.size() && (source_[at] == '-' || source_[at] == '+'))
                    end_sign = source_[at++];
                if (starts_with(at, "%}")) {
                    push_text(content, tag, sign, false);
                    finish_end_tag(at + 2, end_sign, true);
                    return;
                }
            }
            search = tag + 1;
        }
    }

    bool match_end_tag(bool is_block) {
        if (!balance_.empty()) return false;
        if (is_block) {
            for (char sign : {'+', '-', '\0'}) {
                size_t at = pos_ + (sign != '\0' ? 1 : 0);
                if (sign != '\0' && (pos_ >= source_.size() || source_[pos_] != sign)) continue;
                if (!starts_with(at, "%}")) continue;
                push(TokenType::BlockEnd, pos_, "%}");
                finish_end_tag(at + 2, sign, true);
                return true;
            }
            return false;
        }
        if (starts_with(pos_, "-}}")) {
            push(TokenType::VariableEnd, pos_, "}}");
            finish_end_tag(pos_ + 3, '-', false);
            return true;
        }
        if (starts_with(pos_, "}}")) {
            push(TokenType::VariableEnd, pos_, "}}");
            finish_end_tag(pos_ + 2, '\0', false);
            return true;
        }
        return false;
    }

    void lex_tag(bool is_block) {
        while (pos_ < source_.size()) {
            if (match_end_tag(is_block)) return;
            size_t n_space = whitespace_at(pos_);
            if (n_space > 0) {
                pos_ += n_space;
                continue;
            }
            if (lex_number() || lex_name() || lex_string() || lex_operator()) continue;
            size_t end = pos_;
            char32_t c = next_code_point(end);
            std::string shown;
            append_utf8(shown, c);
            fail(pos_, "unexpected char " + repr_string(shown));
        }
    }

    // (\d+_)*\d+ at `offset`; returns the end or npos.
    size_t digits_at(size_t offset, bool (*is_digit_char)(char) = is_ascii_digit) const {
        size_t at = offset;
        if (at >= source_.size() || !is_digit_char(source_[at])) return std::string::npos;
        while (true) {
            while (at < source_.size() && is_digit_char(source_[at])) ++at;
            if (at + 1 < source_.size() && source_[at] == '_' && is_digit_char(source_[at + 1])) {
                ++at;
                continue;
            }
            return at;
        }
    }

    size_t exponent_at(size_t offset) const {
        if (offset >= source_.size() || (source_[offset] != 'e' && source_[offset] != 'E'))
            return std::string::npos;
        size_t at = offset + 1;
        if (at < source_.size() && (source_[at] == '+' || source_[at] == '-')) ++at;
        return digits_at(at);
    }

    size_t float_end() const {
        if (pos_ > 0 && source_[pos_ - 1] == '.') return std::string::npos;
        size_t whole = digits_at(pos_);
        if (whole == std::string::npos) return std::string::npos;
        size_t fraction = std::string::npos;
        if (whole < source_.size() && source_[whole] == '.') fraction = digits_at(whole + 1);
        if (fraction != std::string::npos) {
            size_t exponent = exponent_at(fraction);
            return exponent != std::string::npos ? exponent : fraction;
        }
        return exponent_at(whole);
    }

    size_t integer_end(int& base) const {
        base = 10;
        if (source_[pos_] == '0' && pos_ + 1 < source_.size()) {
            char prefix = static_cast<char>(source_[pos_ + 1] | 0x20);
            auto valid = prefix == 'b' ? +[](char c) { return c == '0' || c == '1'; }
                       : prefix == 'o' ? +[](char c) { return c >= '0' && c <= '7'; }
                       : prefix == 'x' ? +[](char c) { return is_ascii_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }
                                       : nullptr;
            if (valid != nullptr) {
                size_t at = pos_ + 2;
                size_t end = std::string::npos;
                while (true) {
                    size_t next = at < source_.size() && source_[at] == '_' ? at + 1 : at;
                    if (next >= source_.size() || !valid(source_[next])) break;
                    end = at = next + 1;
                }
                if (end != std::string::npos) {
                    base = prefix == 'b' ? 2 : (prefix == 'o' ? 8 : 16);
                    return end;
                }
            }
        }
        if (source_[pos_] == '0') {
            size_t at = pos_ + 1;
            while (true) {
                size_t next = at < source_.size() && source_[at] == '_' ? at + 1 : at;
                if (next >= source_.size() || source_[next] != '0') break;
                at = next + 1;
            }
            return at;
        }
        if (!is_ascii_digit(source_[pos_])) return std::string::npos;
        size_t at = pos_ + 1;
        while (true) {
            size_t next = at < source_.size() && source_[at] == '_' ? at + 1 : at;
            if (next >= source_.size() || !is_ascii_digit(source_[next])) break;
            at = next + 1;
        }
        return at;
    }

    bool lex_number() {
        size_t end = float_end();
        if (end != std::string::npos) {
            std::string text;
            for (size_t at = pos_; at < end; ++at) {
                if (source_[at] != '_') text += source_[at];
            }
            push(TokenType::Float, pos_, source_.substr(pos_, end - pos_));
            tokens_.back().floating = std::strtod(text.c_str(), nullptr);
            pos_ = end;
            return true;
        }
        int base = 10;
        end = integer_end(base);
        if (end == std::string::npos) return false;
        std::string digits;
        for (size_t at = pos_ + (base == 10 ? 0 : 2); at < end; ++at) {
            if (source_[at] != '_') digits += source_[at];
        }
        errno = 0;
        unsigned long long value = std::strtoull(digits.c_str(), nullptr, base);
        if (errno == ERANGE || value > static_cast<unsigned long long>(INT64_MAX)) {
            fail(pos_, "integer literal too large (the interpreter's ints are 64-bit)");
        }
        push(TokenType::Integer, pos_, source_.substr(pos_, end - pos_));
        tokens_.back().integer = static_cast<int64_t>(value);
        pos_ = end;
        return true;
    }

    bool lex_name() {
        size_t end = pos_;
        size_t n_chars = 0;
        char32_t first = 0;
        while (end < source_.size()) {
            size_t next = end;
            char32_t c = next_code_point(next);
            if (!is_word_char(c) && c != 0xB7) break;
            if (n_chars++ == 0) first = c;
            end = next;
        }
        if (end == pos_) return false;
        if (!(first == '_' || is_alpha(first))) fail(pos_, "Invalid character in identifier");
        push(TokenType::Name, pos_, source_.substr(pos_, end - pos_));
        pos_ = end;
        return true;
    }

    bool lex_string() {
        char quote = source_[pos_];
        if (quote != '\'' && quote != '"') return false;
        size_t at = pos_ + 1;
        while (at < source_.size() && source_[at] != quote) at += source_[at] == '\\' ? 2 : 1;
        if (at >= source_.size()) return false;
        std::string raw = source_.substr(pos_ + 1, at - pos_ - 1);
        std::string value;
        std::string error;
        if (!unescape_string_literal(raw, value, error)) fail(pos_, error);
        push(TokenType::String, pos_, std::move(value));
        pos_ = at + 1;
        return true;
    }

    bool lex_operator() {
        static constexpr std::string_view kTwoChar[] = {"//", "**", "==", "!=", ">=", "<="};
        for (auto op : kTwoChar) {
            if (starts_with(pos_, op)) {
                push(TokenType::Operator, pos_, std::string(op));
                pos_ += 2;
                return true;
            }
        }
        char c = source_[pos_];
        if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos)
            return false;
        if (c == '(' || c == '[' || c == '{') {
            balance_.push_back(c == '(' ? ')' : (c == '[' ? ']' : '}'));
        } else if (c == ')' || c == ']' || c == '}') {
            if (balance_.empty()) fail(pos_, std::string("unexpected '") + c + "'");
            char expected = balance_.back();
            balance_.pop_back();
            if (expected != c) {
                fail(pos_, std::string("unexpected '") + c + "', expected '" + expected + "'");
            }
        }
        push(TokenType::Operator, pos_, std::string(1, c));
        ++pos_;
        return true;
    }

    const std::string& name_;
    std::string source_;
    std::vector<size_t> line_starts_;
    size_t pos_ = 0;
    bool line_starting_ = true;
    std::vector<char> balance_;  // closers expected for open (, [ and {
    std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source, const std::string& template_name) {
    return Lexer(source, template_name).run();
}

std::string describe_token(const Token& token) {
    switch (token.type) {
        case TokenType::Data: return "template data / text";
        case TokenType::VariableBegin: return "begin of print statement";
        case TokenType::VariableEnd: return "end of print statement";
        case TokenType::BlockBegin: return "begin of statement block";
        case TokenType::BlockEnd: return "end of statement block";
        case TokenType::String: return "string";
        case TokenType::Integer: return "integer";
        case TokenType::Float: return "float";
        case TokenType::Eof: return "end of template";
        case TokenType::Name:
        case TokenType::Operator: return token.text;
    }
    return token.text;
}

}  // namespace cherenkov::text::jinja
