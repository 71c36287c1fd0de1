// Statements: scoping of set in loops and macros, namespaces, loop variables, break/continue
// and for-else, macros with defaults/varargs/kwargs/caller, call/filter/set blocks, and
// runtime errors that name the template position.
#include "text/jinja/renderer.h"

#include <gtest/gtest.h>

#include "render_helpers.h"

namespace cherenkov::text::jinja {
namespace {

using testing::render;
using testing::render_error;

TEST(JinjaRenderer, SetInsideLoopDoesNotLeakAndEachIterationStartsFresh) {
    EXPECT_EQ(
        render(
            "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = 2 %}{{ x }}{% endfor %}{{ x }}"),
        "12121");
    EXPECT_EQ(
        render(
            "{% for i in [1, 2] %}{% if i == 2 %}[{{ x }}]{% endif %}{% set x = i %}{% endfor %}"),
        "[]");
    EXPECT_EQ(render("{% if true %}{% set y = 3 %}{% endif %}{{ y }}"), "3");
}

TEST(JinjaRenderer, NamespaceCarriesStateOutOfLoops) {
    EXPECT_EQ(render("{% set ns = namespace(n=0, seen=[]) %}{% for i in [1, 2, 3] %}"
                     "{% set ns.n = ns.n + i %}{% set ns.seen = ns.seen + [i] %}{% endfor %}"
                     "{{ ns.n }} {{ ns.seen }} {{ ns }}"),
              "6 [1, 2, 3] <Namespace {'n': 6, 'seen': [1, 2, 3]}>");
    EXPECT_EQ(render_error("{% set x = 1 %}{% set x.a = 2 %}"),
              "t.jinja:1:19: cannot assign attribute on non-namespace object");
}

TEST(JinjaRenderer, LoopVariables) {
    EXPECT_EQ(render("{% for c in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                     "{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ "
                     "loop.nextitem }};"
                     "{% endfor %}"),
              "103TrueFalse3b;212FalseFalse3ac;321FalseTrue3b;");
    EXPECT_EQ(render("{% for x in [1, 2, 3] %}{{ loop.cycle('a', 'b') }}{% endfor %}"), "aba");
    EXPECT_EQ(
        render("{% for x in [1, 1, 2] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}"),
        "12");
}

TEST(JinjaRenderer, LoopFilterAndElse) {
    EXPECT_EQ(render("{% for x in [3, 1, 2] if x > 1 %}{{ loop.index }}/{{ loop.length }}={{ x }} "
                     "{% endfor %}"),
              "1/2=3 2/2=2 ");
    EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
    // Jinja2 runs the else block unless some iteration reached the end of the body.
    EXPECT_EQ(render("{% for x in [1, 2] %}{% break %}{% else %}E{% endfor %}"), "E");
    EXPECT_EQ(render("{% for x in [1, 2] %}{{ x }}{% if x == 2 %}{% break %}{% endif %}{% else "
                     "%}E{% endfor %}"),
              "12");
}

TEST(JinjaRenderer, BreakAndContinue) {
    EXPECT_EQ(render("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
                     "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}"),
              "13");
    EXPECT_EQ(render("{% for x in [1, 2] %}{% set b %}{{ x }}{% continue %}{% endset %}[{{ b }}]{% "
                     "endfor %}"),
              "");
}

TEST(JinjaRenderer, TupleUnpacking) {
    EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}|items %}{{ k }}={{ v }};{% endfor %}"),
              "a=1;b=2;");
    EXPECT_EQ(render("{% set a, (b, c) = 1, [2, 3] %}{{ a }}{{ b }}{{ c }}"), "123");
    EXPECT_EQ(render_error("{% set a, b = [1, 2, 3] %}"),
              "t.jinja:1:4: too many values to unpack (expected 2)");
}

TEST(JinjaRenderer, MacrosSeeTheirDefiningScopeAtCallTime) {
    EXPECT_EQ(
        render(
            "{% macro m() %}{{ y }}{% endmacro %}{% set y = 5 %}{{ m() }}{% set y = 6 %}{{ m() }}"),
        "56");
    EXPECT_EQ(
        render(
            "{% macro m() %}[{{ item }}]{% endmacro %}{% for item in [1] %}{{ m() }}{% endfor %}"),
        "[]");
}

TEST(JinjaRenderer, MacroArguments) {
    const std::string macro =
        "{% macro m(a, b=a * 2) %}{{ a }},{{ b }},{{ varargs }},{{ kwargs }}{% endmacro %}";
    EXPECT_EQ(render(macro + "{{ m(1) }}|{{ m(1, 5, 6, k='v') }}|{{ m(b=3, a=4) }}"),
              "1,2,(),{}|1,5,(6,),{'k': 'v'}|4,3,(),{}");
    EXPECT_EQ(render("{% macro m(a) %}[{{ a }}]{% endmacro %}{{ m() }}"), "[]");
    EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
              "t.jinja:1:35: macro 'm' takes not more than 1 argument(s)");
    EXPECT_EQ(render_error("{% macro m(a) %}{% endmacro %}{{ m(z=1) }}"),
              "t.jinja:1:35: macro 'm' takes no keyword argument 'z'");
}

TEST(JinjaRenderer, CallBlocksPassACaller) {
    EXPECT_EQ(render("{% macro wrap(t) %}<{{ t }}>{{ caller(t|upper) }}</{{ t }}>{% endmacro %}"
                     "{% call(x) wrap('b') %}[{{ x }}]{% endcall %}"),
              "<b>[B]</b>");
}

TEST(JinjaRenderer, FilterSetAndWithBlocks) {
    EXPECT_EQ(render("{% filter upper %}a{{ 'b' }}{% endfilter %}"), "AB");
    EXPECT_EQ(render("{% set x | trim | upper %}  hi  {% endset %}[{{ x }}]"), "[HI]");
    EXPECT_EQ(render("{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]"), "3[]");
}

TEST(JinjaRenderer, RecursiveLoops) {
    EXPECT_EQ(render("{% for n in tree recursive %}{{ n.name }}{% if n.kids %}({{ loop(n.kids) "
                     "}}){% endif %}"
                     "{% endfor %}",
                     {{"tree",
                       {{{"name", "a"},
                         {"kids", {{{"name", "b"}, {"kids", nlohmann::ordered_json::array()}}}}},
                        {{"name", "c"}}}}}),
              "a(b)c");
}

TEST(JinjaRenderer, RaiseExceptionKeepsTheTemplatesMessage) {
    EXPECT_EQ(render_error("line one\n{{ raise_exception('No user query found in messages.') }}"),
              "No user query found in messages.");
}

TEST(JinjaRenderer, RuntimeErrorsNameThePosition) {
    EXPECT_EQ(render_error("a\n  {{ missing.attr }}"), "t.jinja:2:13: 'missing' is undefined");
    EXPECT_EQ(render_error("{{ {'a': 1}.b.c }}"),
              "t.jinja:1:14: 'dict object' has no attribute 'b'");
    EXPECT_EQ(render_error("{{ 1 / 0 }}"), "t.jinja:1:4: division by zero");
    EXPECT_EQ(render_error("{{ [].append(1) }}"),
              "t.jinja:1:13: access to attribute 'append' of 'list' object is unsafe.");
}

TEST(JinjaRenderer, UndefinedPrintsEmptyAndIsFalsy) {
    EXPECT_EQ(render("[{{ nope }}]{% if nope %}x{% endif %}{{ nope|length }}{% for x in nope %}x{% "
                     "endfor %}"),
              "[]0");
    EXPECT_EQ(render("{{ nope is defined }}{{ {'a': 1}.b is defined }}{{ [][3] is undefined }}"),
              "FalseFalseTrue");
}

TEST(JinjaRenderer, GenerationTagRendersItsBody) {
    EXPECT_EQ(render("a{% generation %}b{{ 1 }}{% endgeneration %}c"), "ab1c");
}

TEST(JinjaRenderer, NamedBlocksRenderInPlace) {
    EXPECT_EQ(render("{% set x = 1 %}{% block b %}[{{ x }}]{% endblock %}"), "[1]");
}

}  // namespace
}  // namespace cherenkov::text::jinja
