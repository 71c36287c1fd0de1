// Grammar: precedence and associativity as Jinja2 parses them, and syntax errors that name the
// template, line and column.
#include "text/jinja/parser.h"

#include <gtest/gtest.h>

#include "render_helpers.h"

namespace cherenkov::text::jinja {
namespace {

using testing::render;
using testing::render_error;

TEST(JinjaParser, PrecedenceMatchesJinja2) {
    EXPECT_EQ(render("{{ 1 + 2 * 3 }}"), "7");
    EXPECT_EQ(render("{{ 2 ** 3 ** 2 }}"), "64");  // Jinja2's ** is left-associative
    EXPECT_EQ(render("{{ -2 ** 2 }}"), "4");       // unary minus binds tighter than **
    EXPECT_EQ(render("{{ 'a' ~ 1 * 2 }}"), "a2");  // ~ sits between + and *
    EXPECT_EQ(render_error("{{ 'a' ~ 1 + 2 }}"),
              "t.jinja:1:4: can only concatenate str (not \"int\") to str");
    EXPECT_EQ(render("{{ 10 - 2 - 3 }}"), "5");
    EXPECT_EQ(render("{{ not 1 == 2 }}"), "True");
    EXPECT_EQ(render("{{ 1 if false else 2 if false else 3 }}"), "3");
    EXPECT_EQ(render("{{ '\n' + ' x '|trim + '\n' }}"), "\nx\n");
    EXPECT_EQ(render("{{ 'ab' is string and 1 is number }}"), "True");
}

TEST(JinjaParser, TestArgumentsWithoutParentheses) {
    EXPECT_EQ(render("{{ 6 is divisibleby 3 }}{{ 'a' is in ['a'] }}{{ 1 is not none }}"),
              "TrueTrueTrue");
    EXPECT_EQ(render("{{ x is defined and true }}"), "False");
}

TEST(JinjaParser, TuplesAndSubscripts) {
    EXPECT_EQ(render("{{ 1, 2 }}"), "(1, 2)");
    EXPECT_EQ(render("{{ (1,) }}{{ () }}"), "(1,)()");
    EXPECT_EQ(render("{{ [1, 2, 3][::-1] }}{{ 'abc'[1:] }}{{ [[1]].0.0 }}"), "[3, 2, 1]bc1");
    EXPECT_EQ(render("{{ {'a': 1,}['a'] }}{{ [1,][0] }}"), "11");
}

TEST(JinjaParser, AdjacentStringsConcatenate) {
    EXPECT_EQ(render("{{ 'a' 'b' \"c\" }}"), "abc");
}

TEST(JinjaParser, UnknownTagNamesTheTag) {
    EXPECT_EQ(render_error("ok\n{% frobnicate %}"),
              "t.jinja:2:4: Encountered unknown tag 'frobnicate'.");
}

TEST(JinjaParser, UnclosedBlockSaysWhatWasExpected) {
    EXPECT_EQ(render_error("{% for x in y %}\nbody"),
              "t.jinja:2:5: Unexpected end of template. Jinja was looking for the following tags: "
              "'endfor' or 'else'. The innermost block that needs to be closed is 'for'.");
}

TEST(JinjaParser, StrayEndTagIsUnknown) {
    EXPECT_EQ(render_error("{% endif %}"), "t.jinja:1:4: Encountered unknown tag 'endif'.");
}

TEST(JinjaParser, ExpressionErrors) {
    EXPECT_EQ(render_error("{{ }}"),
              "t.jinja:1:4: Expected an expression, got 'end of print statement'");
    EXPECT_EQ(render_error("{{ 1 + }}"), "t.jinja:1:8: unexpected 'end of print statement'");
    EXPECT_EQ(render_error("{{ x is string is string }}"),
              "t.jinja:1:16: You cannot chain multiple tests with is");
    EXPECT_EQ(render_error("{% set 1 = 2 %}"), "t.jinja:1:8: can't assign to 'integer'");
    EXPECT_EQ(render_error("{% macro m(a=1, b) %}{% endmacro %}"),
              "t.jinja:1:18: non-default argument follows default argument");
}

TEST(JinjaParser, UnknownFilterFailsAtParseOutsideIf) {
    EXPECT_EQ(render_error("{{ 1 }}\n{{ x | nope }}"), "t.jinja:2:8: No filter named 'nope'.");
    EXPECT_EQ(render_error("{{ x is nope }}"), "t.jinja:1:6: No test named 'nope'.");
    EXPECT_EQ(render_error("{{ x | urlize }}"), "t.jinja:1:8: filter 'urlize' is not supported");
}

TEST(JinjaParser, UnknownFilterInsideIfFailsOnlyWhenEvaluated) {
    EXPECT_EQ(render("{% if false %}{{ x | nope }}{% endif %}ok"), "ok");
    EXPECT_EQ(render("{{ (x | nope) if false else 'ok' }}"), "ok");
    EXPECT_EQ(render_error("{% if true %}{{ 1 | nope }}{% endif %}"),
              "t.jinja:1:21: No filter named 'nope' found.");
}

TEST(JinjaParser, LoopControlsOnlyInsideLoops) {
    EXPECT_EQ(render_error("{% break %}"), "t.jinja:1:4: 'break' outside loop");
    EXPECT_EQ(
        render_error("{% for x in [1] %}{% macro m() %}{% continue %}{% endmacro %}{% endfor %}"),
        "t.jinja:1:37: 'continue' outside loop");
}

TEST(JinjaParser, LoaderTagsAreRejected) {
    EXPECT_EQ(
        render_error("{% include 'x.jinja' %}"),
        "t.jinja:1:4: the 'include' tag is not supported: templates are rendered without a loader");
}

TEST(JinjaParser, NestingIsBounded) {
    std::string deep(200, '(');
    EXPECT_NE(render_error("{{ " + deep + "1" + std::string(200, ')') + " }}")
                  .find("nesting deeper than"),
              std::string::npos);
}

}  // namespace
}  // namespace cherenkov::text::jinja
