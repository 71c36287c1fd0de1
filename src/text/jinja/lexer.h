// Splits template source into tokens the way Jinja2's lexer does with the settings transformers
// uses for chat templates: trim_blocks and lstrip_blocks on, `-`/`+` whitespace control,
// comments and {% raw %} dropped or passed through, one trailing newline removed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/source_pos.h"

namespace cherenkov::text::jinja {

enum class TokenType {
    Data,           // template text between tags
    VariableBegin,  // {{
    VariableEnd,    // }}
    BlockBegin,     // {%
    BlockEnd,       // %}
    Name,
    String,
    Integer,
    Float,
    Operator,
    Eof,
};

struct Token {
    TokenType type = TokenType::Eof;
    std::string text;  // Data/String: the value; Name/Operator: the spelling
    int64_t integer = 0;
    double floating = 0.0;
    SourcePos pos;
};

// Throws InvalidInput "<name>:<line>:<column>: <message>" on malformed input (unterminated
// comment or raw block, unbalanced brackets, bad characters or escapes, invalid UTF-8).
std::vector<Token> tokenize(std::string_view source, const std::string& template_name);

// "Jinja2 describes a token": the name itself, or a word for the token type.
std::string describe_token(const Token& token);

}  // namespace cherenkov::text::jinja
