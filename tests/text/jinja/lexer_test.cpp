// Tokenization and whitespace control: trim_blocks, lstrip_blocks, `-` and `+` markers,
// comments, raw blocks, the dropped trailing newline, and lexer errors with positions.
#include "text/jinja/lexer.h"

#include <gtest/gtest.h>

#include "render_helpers.h"

namespace cherenkov::text::jinja {
namespace {

using testing::render;
using testing::render_error;

TEST(JinjaLexer, TokensCarryLineAndColumn) {
    auto tokens = tokenize("ab\n{{ x + 1.5 }}\n  {% if y %}", "t");
    ASSERT_GE(tokens.size(), 8u);
    EXPECT_EQ(tokens[0].type, TokenType::Data);
    EXPECT_EQ(tokens[0].text, "ab\n");
    EXPECT_EQ(tokens[1].type, TokenType::VariableBegin);
    EXPECT_EQ(tokens[1].pos.line, 2);
    EXPECT_EQ(tokens[1].pos.column, 1);
    EXPECT_EQ(tokens[2].text, "x");
    EXPECT_EQ(tokens[2].pos.column, 4);
    EXPECT_EQ(tokens[4].type, TokenType::Float);
    EXPECT_DOUBLE_EQ(tokens[4].floating, 1.5);
    EXPECT_EQ(tokens.back().type, TokenType::Eof);
}

TEST(JinjaLexer, ColumnsCountCodePoints) {
    auto tokens = tokenize("héé{{ x }}", "t");
    EXPECT_EQ(tokens[1].pos.column, 4);
}

TEST(JinjaLexer, NumbersFollowPythonLiterals) {
    auto tokens = tokenize("{{ 1_000 0x1F 0o17 0b101 1e3 2.5E-1 }}", "t");
    EXPECT_EQ(tokens[1].integer, 1000);
    EXPECT_EQ(tokens[2].integer, 31);
    EXPECT_EQ(tokens[3].integer, 15);
    EXPECT_EQ(tokens[4].integer, 5);
    EXPECT_DOUBLE_EQ(tokens[5].floating, 1000.0);
    EXPECT_DOUBLE_EQ(tokens[6].floating, 0.25);
}

TEST(JinjaLexer, TrimBlocksDropsTheNewlineAfterABlockTag) {
    EXPECT_EQ(render("{% if true %}\nx\n{% endif %}\ny"), "x\ny");
    // Not after an expression.
    EXPECT_EQ(render("{{ 1 }}\nx"), "1\nx");
}

TEST(JinjaLexer, LstripBlocksStripsIndentBeforeBlockTagsOnly) {
    EXPECT_EQ(render("  {% if true %}\n  x\n  {% endif %}\n"), "  x\n");
    EXPECT_EQ(render("  {{ 'v' }}"), "  v");
    EXPECT_EQ(render("a  {% if true %}b{% endif %}"), "a  b");
}

TEST(JinjaLexer, MinusStripsAllWhitespaceAndPlusKeepsIt) {
    EXPECT_EQ(render("a \n\t {{- 'b' -}} \n c"), "abc");
    EXPECT_EQ(render("x\n  {%+ if true %}y{% endif %}"), "x\n  y");
    EXPECT_EQ(render("{% if true +%}\ny{% endif %}"), "\ny");
    EXPECT_EQ(render("a\u3000{{- 'b' }}"), "ab");
}

TEST(JinjaLexer, CommentsVanishWithTheirWhitespaceRules) {
    EXPECT_EQ(render("a {#- note -#} b"), "ab");
    EXPECT_EQ(render("a\n  {# note #}\nb"), "a\nb");
}

TEST(JinjaLexer, RawBlocksPassTagsThrough) {
    EXPECT_EQ(render("{% raw %}{{ x }}{% if %}{% endraw %}"), "{{ x }}{% if %}");
    EXPECT_EQ(render("{% raw -%}  a  {%- endraw %}"), "a");
}

TEST(JinjaLexer, DropsOneTrailingNewlineAndNormalizesLineEnds) {
    EXPECT_EQ(render("a\n"), "a");
    EXPECT_EQ(render("a\n\n"), "a\n");
    EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(JinjaLexer, StringEscapesFollowPythonUnicodeEscape) {
    EXPECT_EQ(render(R"({{ 'a\tb\n\u00e9\x41\101\\ \q' }})"),
              "a\tb\n\xC3\xA9"
              "AA\\ \\q");
    EXPECT_EQ(render(R"({{ "it's" ~ 'say "hi"' }})"),
              "it's"
              "say \"hi\"");
}

TEST(JinjaLexer, ErrorsNameTemplateLineAndColumn) {
    EXPECT_EQ(render_error("ok\n{# never closed"), "t.jinja:2:1: Missing end of comment tag");
    EXPECT_EQ(render_error("{{ (1 ]] }}"), "t.jinja:1:7: unexpected ']', expected ')'");
    EXPECT_EQ(render_error("x\n\n  {{ 1 ! 2 }}"), "t.jinja:3:8: unexpected char '!'");
    EXPECT_EQ(render_error("{% raw %}abc"), "t.jinja:1:1: Missing end of raw directive");
    EXPECT_EQ(render_error(R"({{ '\x4' }})"), "t.jinja:1:4: truncated \\xXX escape");
}

TEST(JinjaLexer, RejectsInvalidUtf8) {
    EXPECT_EQ(render_error(std::string("a\xFF")), "t.jinja:1:1: template is not valid UTF-8");
}

}  // namespace
}  // namespace cherenkov::text::jinja
