// Python str helpers: repr of floats and strings, whitespace-aware split/strip, case mapping.
#include "text/jinja/python_text.h"

#include <gtest/gtest.h>

#include <cmath>

namespace cherenkov::text::jinja {
namespace {

TEST(PythonText, FloatReprIsShortestRoundTrip) {
    EXPECT_EQ(repr_float(1.0), "1.0");
    EXPECT_EQ(repr_float(0.1), "0.1");
    EXPECT_EQ(repr_float(1.0 / 3.0), "0.3333333333333333");
    EXPECT_EQ(repr_float(1e16), "1e+16");
    EXPECT_EQ(repr_float(123456789012345678.0), "1.2345678901234568e+17");
    EXPECT_EQ(repr_float(1e-5), "1e-05");
    EXPECT_EQ(repr_float(0.0001), "0.0001");
    EXPECT_EQ(repr_float(-0.0), "-0.0");
    EXPECT_EQ(repr_float(1.5e300), "1.5e+300");
    EXPECT_EQ(repr_float(INFINITY), "inf");
    EXPECT_EQ(repr_float(NAN), "nan");
}

TEST(PythonText, StringReprChoosesQuotesAndEscapes) {
    EXPECT_EQ(repr_string("abc"), "'abc'");
    EXPECT_EQ(repr_string("it's"), "\"it's\"");
    EXPECT_EQ(repr_string("'\""), "'\\'\"'");
    EXPECT_EQ(repr_string("a\nb\t\x01\x7f\\"), "'a\\nb\\t\\x01\\x7f\\\\'");
    EXPECT_EQ(repr_string("é\u200b\u00a0"), "'é\\u200b\\xa0'");
}

TEST(PythonText, SplitAndStripUseUnicodeWhitespace) {
    EXPECT_EQ(py_split("  a \u3000b\n", std::nullopt, -1), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(py_split("a b c", std::nullopt, 1), (std::vector<std::string>{"a", "b c"}));
    EXPECT_EQ(py_rsplit("a b c", std::nullopt, 1), (std::vector<std::string>{"a b", "c"}));
    EXPECT_EQ(py_split("a::b", std::string(":"), -1), (std::vector<std::string>{"a", "", "b"}));
    EXPECT_EQ(py_strip("\u00a0 x\t", std::nullopt, StripSide::Both), "x");
    EXPECT_EQ(py_strip("xxaxx", std::string("x"), StripSide::Left), "axx");
    EXPECT_EQ(py_splitlines("a\r\nb\u2028c\n", false), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(PythonText, CaseMappingUsesFullMappings) {
    EXPECT_EQ(py_upper("straße ﬁ"), "STRASSE FI");
    EXPECT_EQ(py_lower("ΣΑΣ Σ"), "σας σ");
    EXPECT_EQ(py_title("they're bill's"), "They'Re Bill'S");
    EXPECT_EQ(py_capitalize("hELLO"), "Hello");
}

TEST(PythonText, ReplaceWithEmptyPatternInsertsBetweenCharacters) {
    EXPECT_EQ(py_replace("ab", "", "-", -1), "-a-b-");
    EXPECT_EQ(py_replace("aaa", "a", "b", 2), "bba");
}

TEST(PythonText, Utf8Helpers) {
    EXPECT_TRUE(is_valid_utf8("é😀"));
    EXPECT_FALSE(is_valid_utf8("\xC3"));
    EXPECT_FALSE(is_valid_utf8("\xED\xA0\x80"));  // a UTF-16 surrogate
    EXPECT_EQ(count_code_points("é😀a"), 3u);
    EXPECT_EQ(code_point_offset("é😀a", 2), 6u);
}

}  // namespace
}  // namespace cherenkov::text::jinja
