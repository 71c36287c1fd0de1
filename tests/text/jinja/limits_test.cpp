// Pathological templates stop with ResourceExhausted instead of hanging or exhausting memory.
#include "text/jinja/limits.h"

#include <gtest/gtest.h>

#include "render_helpers.h"

namespace cherenkov::text::jinja {
namespace {

using testing::render_error;
using testing::render_error_kind;

TEST(JinjaLimits, StepBudgetStopsNestedLoops) {
    RenderLimits limits;
    limits.max_steps = 100000;
    EXPECT_EQ(
        render_error_kind(
            "{% for a in range(1000) %}{% for b in range(1000) %}{% endfor %}{% endfor %}", limits),
        ErrorKind::ResourceExhausted);
}

TEST(JinjaLimits, StepBudgetStopsExponentialMacroRecursion) {
    RenderLimits limits;
    limits.max_steps = 100000;
    EXPECT_EQ(render_error_kind(
                  "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}"
                  "{{ f(60) }}",
                  limits),
              ErrorKind::ResourceExhausted);
}

TEST(JinjaLimits, CallDepthStopsInfiniteRecursion) {
    EXPECT_NE(render_error("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")
                  .find("macro calls nested deeper than 100"),
              std::string::npos);
}

TEST(JinjaLimits, StringGrowthIsBounded) {
    RenderLimits limits;
    limits.max_string_bytes = 1 << 20;
    EXPECT_EQ(render_error_kind("{{ 'x' * 2000000 }}", limits), ErrorKind::ResourceExhausted);
    EXPECT_EQ(render_error_kind("{% set ns = namespace(s='xx') %}{% for i in range(40) %}"
                                "{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                                limits),
              ErrorKind::ResourceExhausted);
    EXPECT_EQ(render_error_kind("{{ 'x'|center(5000000) }}", limits), ErrorKind::ResourceExhausted);
}

TEST(JinjaLimits, OutputSizeIsBounded) {
    RenderLimits limits;
    limits.max_output_bytes = 1000;
    EXPECT_EQ(render_error_kind("{% for i in range(2000) %}x{% endfor %}", limits),
              ErrorKind::ResourceExhausted);
}

TEST(JinjaLimits, ListGrowthIsBounded) {
    RenderLimits limits;
    limits.max_list_items = 1000;
    EXPECT_EQ(render_error_kind("{{ [1] * 5000 }}", limits), ErrorKind::ResourceExhausted);
}

TEST(JinjaLimits, NestingOfValuesIsBounded) {
    EXPECT_NE(render_error(
                  "{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}"
                  "{% endfor %}")
                  .find("value nesting exceeds"),
              std::string::npos);
}

}  // namespace
}  // namespace cherenkov::text::jinja
