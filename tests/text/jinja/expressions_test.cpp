// Python semantics of values: printing (str/repr), arithmetic, comparison, `in`, lookups and
// the sandbox, string/list/dict methods, filters and tests.
#include <gtest/gtest.h>

#include "render_helpers.h"

namespace cherenkov::text::jinja {
namespace {

using testing::render;
using testing::render_error;

TEST(JinjaExpressions, PrintsLikePythonStr) {
    EXPECT_EQ(render("{{ none }} {{ true }} {{ 1.0 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ "
                     "0.00001 }} {{ -0.0 }}"),
              "None True 1.0 1e+16 1000000000000000.0 0.0001 1e-05 -0.0");
    EXPECT_EQ(render("{{ [1, 'a', none, 1.5, {'k': (1,)}] }}"), "[1, 'a', None, 1.5, {'k': (1,)}]");
    EXPECT_EQ(render(R"({{ ["it's", 'say "hi"', 'both \' "', 'tab\t\u00e9\x01'] }})"),
              R"(["it's", 'say "hi"', 'both \' "', 'tab\té\x01'])");
}

TEST(JinjaExpressions, Arithmetic) {
    EXPECT_EQ(
        render("{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 2 ** -1 }} {{ 3 / 2 }} {{ 4 / 2 }}"),
        "3 -4 -2 0.5 1.5 2.0");
    EXPECT_EQ(render("{{ -7.5 // 2 }} {{ 7.5 % 2 }} {{ 1 + true }} {{ 0.1 + 0.2 }}"),
              "-4.0 1.5 2 0.30000000000000004");
    EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ [1] + [2] }} {{ (1,) + (2,) }}"),
              "ababab [1, 1] [1, 2] (1, 2)");
    EXPECT_EQ(render_error("{{ 'a' + 1 }}"),
              "t.jinja:1:4: can only concatenate str (not \"int\") to str");
    EXPECT_EQ(render_error("{{ 9223372036854775807 + 1 }}"),
              "t.jinja:1:4: integer overflow: result does not fit in 64 bits");
}

TEST(JinjaExpressions, ComparisonsAndMembership) {
    EXPECT_EQ(render("{{ 1 < 2 < 3 }}{{ 1 == 1.0 == true }}{{ [1, 2] < [1, 3] }}{{ (1,) == [1] }}"),
              "TrueTrueTrueFalse");
    EXPECT_EQ(
        render("{{ 'b' in 'abc' }}{{ 2 in [1, 2] }}{{ 'k' in {'k': 1} }}{{ 'x' not in none_var }}"),
        "TrueTrueTrueTrue");
    EXPECT_EQ(render_error("{{ 1 < 'a' }}"),
              "t.jinja:1:8: '<' not supported between instances of 'int' and 'str'");
    EXPECT_EQ(render_error("{{ 1 in 'abc' }}"),
              "t.jinja:1:9: 'in <string>' requires string as left operand, not int");
}

TEST(JinjaExpressions, LogicReturnsOperands) {
    EXPECT_EQ(render("{{ 0 or 'x' }}{{ 'a' and 'b' }}{{ none or [] }}{{ not '' }}"), "xb[]True");
}

TEST(JinjaExpressions, ConcatenationStringifies) {
    EXPECT_EQ(render("{{ 'a' ~ 1 ~ none ~ undefined_var ~ [1] }}"), "a1None[1]");
}

TEST(JinjaExpressions, AttributeLookupPrefersPythonAttributes) {
    nlohmann::ordered_json context = {{"d", {{"items", "key"}, {"content", "c"}}}};
    EXPECT_EQ(render("{{ d['items'] }}|{{ d.content }}|{{ d.items()|list }}", context),
              "key|c|[('items', 'key'), ('content', 'c')]");
    EXPECT_EQ(render("{{ d.__class__ }}|{{ d.missing }}|{{ [1][5] }}", context), "||");
}

TEST(JinjaExpressions, SafeStringsEscapeTheOtherOperand) {
    EXPECT_EQ(
        render("{{ '<' + ('a'|safe) }}|{{ ('a'|safe) + '<' }}|{{ '<b>'|e }}|{{ [('x'|safe)] }}"),
        "&lt;a|a&lt;|&lt;b&gt;|[Markup('x')]");
}

TEST(JinjaExpressions, StringMethods) {
    EXPECT_EQ(render("{{ ' a b '.split() }}{{ 'a,,b'.split(',') }}{{ 'a-b-c'.rsplit('-', 1) }}"),
              "['a', 'b']['a', '', 'b']['a-b', 'c']");
    EXPECT_EQ(
        render("{{ '<think>x</think>y'.split('</think>')[0].rstrip('\\n').split('<think>')[-1] }}"),
        "x");
    EXPECT_EQ(render("{{ 'héllo'.find('l') }}{{ 'Hello'.startswith(('x', 'He')) }}{{ '\\n x "
                     "\\n'.strip('\\n') }}"),
              "2True x ");
    EXPECT_EQ(render("{{ 'ß'.upper() }}{{ 'hello world'.title() }}{{ 'x'.center(5, '*') }}{{ "
                     "'{}:{:>4}'.format(1, 'a') }}"),
              "SSHello World**x**1:   a");
    EXPECT_EQ(render("{{ '%s=%05.1f|%-3d|%x' % ('v', 3.14159, 7, 255) }}"), "v=003.1|7  |ff");
}

TEST(JinjaExpressions, DictAndListMethods) {
    EXPECT_EQ(render("{{ {'a': 1}.get('a') }}{{ {'a': 1}.get('b', 2) }}{{ {'a': 1}.keys()|list "
                     "}}{{ [1, 2, 1].count(1) }}"),
              "12['a']2");
    EXPECT_EQ(render("{{ {'a': 1}.items() }}"), "dict_items([('a', 1)])");
}

TEST(JinjaExpressions, Filters) {
    EXPECT_EQ(render("{{ [3, 1, 2]|sort }}{{ ['b', 'A', 'a']|sort }}{{ [3, 1, "
                     "2]|sort(reverse=true)|first }}"),
              "[1, 2, 3]['A', 'a', 'b']3");
    EXPECT_EQ(render("{{ ' x '|trim }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'ab'|replace('b', 'c') "
                     "}}|{{ 'hello world'|title }}"),
              "x|  a\n  b|ac|Hello World");
    EXPECT_EQ(render("{{ x|default('d') }}{{ ''|default('d', true) }}{{ '42'|int + 1 }}{{ "
                     "'4.5'|float }}{{ 2.5|round }}"),
              "dd434.52.0");
    EXPECT_EQ(render("{{ [{'r': 'u'}, {'r': 'a'}]|selectattr('r', 'equalto', 'u')|list }}"
                     "{{ [{'r': 'u'}, {'r': 'a'}]|map(attribute='r')|join(',') }}"),
              "[{'r': 'u'}]u,a");
    EXPECT_EQ(render("{{ [1, 2, 3]|select('odd')|list }}{{ [1, 1, 2]|unique|list }}{{ {'b': 1, "
                     "'a': 2}|dictsort }}"),
              "[1, 3][1, 2][('a', 2), ('b', 1)]");
    EXPECT_EQ(render("{{ [1, 2, 3]|batch(2)|list }}{{ [1, 2, 3]|sum }}{{ [1, 2, 3]|max }}{{ "
                     "'abc'|reverse }}"),
              "[[1, 2], [3]]63cba");
}

TEST(JinjaExpressions, GeneratorsAreTruthyAndHaveNoLength) {
    EXPECT_EQ(render("{% if [1]|select('even') %}T{% endif %}"), "T");
    EXPECT_EQ(render_error("{{ [1]|select('odd')|length }}"),
              "t.jinja:1:22: object of type 'generator' has no len()");
}

TEST(JinjaExpressions, Tojson) {
    nlohmann::ordered_json context = {{"v", {{"b", {1, 2.5, nullptr, true}}, {"a", "é\"<\n"}}}};
    EXPECT_EQ(render("{{ v|tojson }}", context),
              "{\"b\": [1, 2.5, null, true], \"a\": \"é\\\"<\\n\"}");
    EXPECT_EQ(
        render("{{ v|tojson(indent=2, sort_keys=true) }}", context),
        "{\n  \"a\": \"é\\\"<\\n\",\n  \"b\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}");
    EXPECT_EQ(
        render("{{ 'é'|tojson(ensure_ascii=true) }}{{ [1, 2]|tojson(separators=(',', ':')) }}"),
        "\"\\u00e9\"[1,2]");
    EXPECT_EQ(render_error("{{ nope|tojson }}"),
              "t.jinja:1:9: Object of type Undefined is not JSON serializable");
}

TEST(JinjaExpressions, Tests) {
    EXPECT_EQ(render("{{ 1 is number }}{{ true is integer }}{{ 'a' is string }}{{ {} is mapping "
                     "}}{{ {} is sequence }}"
                     "{{ nope is iterable }}{{ none is none }}{{ 4 is even }}{{ 'ab' is lower }}{{ "
                     "1 is eq 1.0 }}"),
              "TrueFalseTrueTrueTrueTrueTrueTrueTrueTrue");
}

TEST(JinjaExpressions, GlobalFunctions) {
    EXPECT_EQ(
        render(
            "{{ range(3)|list }}{{ range(5, 0, -2)|list }}{{ dict(a=1) }}{{ namespace(a=1).a }}"),
        "[0, 1, 2][5, 3, 1]{'a': 1}1");
    EXPECT_EQ(
        render_error("{{ range(100001)|length }}"),
        "t.jinja:1:9: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    EXPECT_EQ(render_error("{{ namespace(_x=1) }}"),
              "t.jinja:1:13: Chat templates cannot store underscore-prefixed attributes on a "
              "namespace, but got "
              "'_x'. Please rename the attribute.");
    EXPECT_EQ(render("{{ strftime_now('%Y')|length }}"), "4");
}

}  // namespace
}  // namespace cherenkov::text::jinja
