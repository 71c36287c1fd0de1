#include "text/tool_calls/tool_call_parser.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"
#include "text/tool_calls/parse_harness.h"

namespace cherenkov::text {
namespace {

using harness::any_diagnostic_contains;
using harness::arguments_of;
using harness::Outcome;
using harness::parse_chunks;
using harness::parse_every_split;
using harness::parse_whole;
using Json = nlohmann::ordered_json;

// Exactly what the Qwen3-Coder / Qwen3.5 templates render for one call.
std::string call_markup(const std::string& name,
                        const std::vector<std::pair<std::string, std::string>>& params) {
    std::string text = "<tool_call>\n<function=" + name + ">\n";
    for (const auto& [key, value] : params) {
        text += "<parameter=" + key + ">\n" + value + "\n</parameter>\n";
    }
    return text + "</function>\n</tool_call>";
}

TEST(ToolCallParser, PlainTextIsContentVerbatim) {
    std::string text = "Hello <b>world</b> a < b, x </tool_call> \n\n";
    Outcome outcome = parse_every_split(text);
    EXPECT_EQ(outcome.content, text);
    EXPECT_TRUE(outcome.calls.empty());
    EXPECT_TRUE(outcome.diagnostics.empty());
}

TEST(ToolCallParser, ContentBeforeCallDropsOnlyTheSeparator) {
    std::string text = "Let me check the weather.\n\n" +
                       call_markup("get_weather", {{"city", "Paris"}, {"days", "3"}});
    Outcome outcome = parse_every_split(text);
    EXPECT_EQ(outcome.content, "Let me check the weather.");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].name, "get_weather");
    EXPECT_EQ(outcome.calls[0].arguments, R"({"city":"Paris","days":3})");
    EXPECT_EQ(outcome.calls[0].argument_values, Json::parse(R"({"city":"Paris","days":3})"));
    EXPECT_TRUE(outcome.diagnostics.empty());
}

TEST(ToolCallParser, CallOnlyOutputHasNoContent) {
    Outcome outcome = parse_every_split("\n" + call_markup("list_files", {}) + "\n");
    EXPECT_EQ(outcome.content, "");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].arguments, "{}");
    EXPECT_TRUE(outcome.diagnostics.empty());
}

TEST(ToolCallParser, SeveralCallsInOrder) {
    // Qwen3.5 separates calls with "\n"; Qwen3-Coder the same.
    std::string text = "Two lookups:\n\n" + call_markup("get_weather", {{"city", "Oslo"}}) + "\n" +
                       call_markup("get_weather", {{"city", "Lima"}, {"units", "f"}}) + "\n" +
                       call_markup("write_file", {{"path", "a.txt"}, {"content", "x"}});
    Outcome outcome = parse_every_split(text);
    EXPECT_EQ(outcome.content, "Two lookups:");
    ASSERT_EQ(outcome.calls.size(), 3u);
    EXPECT_EQ(outcome.calls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_EQ(outcome.calls[1].arguments, R"({"city":"Lima","units":"f"})");
    EXPECT_EQ(outcome.calls[2].arguments, R"({"path":"a.txt","content":"x"})");
    EXPECT_NE(outcome.calls[0].id, outcome.calls[1].id);
    EXPECT_TRUE(outcome.diagnostics.empty());
}

TEST(ToolCallParser, UnicodeSplitMidCharacterNeverCutsADelta) {
    std::string text = "Prüfe das Wetter 🌤 in Zürich — 東京も。\n" +
                       call_markup("write_file", {{"path", "ü/😀.txt"}, {"content", "żółw 🐢"}});
    Outcome outcome = parse_every_split(text);
    EXPECT_EQ(outcome.content, "Prüfe das Wetter 🌤 in Zürich — 東京も。");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(arguments_of(outcome.calls[0])["content"], "żółw 🐢");
    EXPECT_EQ(arguments_of(outcome.calls[0])["path"], "ü/😀.txt");
}

TEST(ToolCallParser, ContentIsReleasedAsSoonAsItCannotStartAMarker) {
    ToolCallParser parser(harness::test_tools());
    EXPECT_EQ(parser.push("Hello <b").content, "Hello <b");
    EXPECT_EQ(parser.push(">bold</b> and ").content, ">bold</b> and");
    EXPECT_EQ(parser.push("<tool").content, "");  // " <tool" may start a call
    EXPECT_EQ(parser.push("box>").content, " <toolbox>");
    EXPECT_EQ(parser.push("\n<tool_call>\n<function=list_files>\n</function>").calls.size(), 1u);
    ParseResult result = parser.finish();
    EXPECT_EQ(result.content, "Hello <b>bold</b> and <toolbox>");
    EXPECT_EQ(result.tail.content, "");
    EXPECT_TRUE(result.tail.calls.empty());
    EXPECT_EQ(result.calls.size(), 1u);
}

TEST(ToolCallParser, TrailingWhitespaceWithoutACallIsKept) {
    Outcome outcome = parse_every_split("Done.\n\n \t");
    EXPECT_EQ(outcome.content, "Done.\n\n \t");
}

TEST(ToolCallParser, RecoversCallWithMissingClosingTags) {
    std::string base =
        "Checking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n"
        "</parameter>\n";
    for (std::string end : {"", "</function>\n", "</function>", "</func", "<", "</tool_call>",
                            "</function>\n</tool_"}) {
        Outcome outcome = parse_every_split(base + end);
        EXPECT_EQ(outcome.content, "Checking.") << end;
        ASSERT_EQ(outcome.calls.size(), 1u) << end;
        EXPECT_EQ(outcome.calls[0].arguments, R"({"city":"Rome"})") << end;
        EXPECT_TRUE(outcome.diagnostics.empty()) << end;
    }
}

TEST(ToolCallParser, RecoversCutOffClosingParameterTag) {
    Outcome outcome =
        parse_every_split("<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</param");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].arguments, R"({"city":"Rome"})");
}

TEST(ToolCallParser, RecoversCallWithoutParametersWhenTextFollowsTheName) {
    Outcome outcome =
        parse_every_split("<tool_call>\n<function=list_files>\nI will now list the files.");
    EXPECT_EQ(outcome.content, "");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].name, "list_files");
    EXPECT_TRUE(any_diagnostic_contains(outcome, "discarded"));
}

TEST(ToolCallParser, ExplanatoryTextAfterCallsIsDiscardedWithOneDiagnostic) {
    std::string text = "Sure.\n" + call_markup("get_weather", {{"city", "Oslo"}}) +
                       "\n\nI have asked for the weather; wait for the result.";
    Outcome outcome = parse_every_split(text);
    EXPECT_EQ(outcome.content, "Sure.");
    ASSERT_EQ(outcome.calls.size(), 1u);
    ASSERT_EQ(outcome.diagnostics.size(), 1u);
    EXPECT_NE(outcome.diagnostics[0].find("discarded"), std::string::npos);
    EXPECT_NE(outcome.diagnostics[0].find("\"I have asked"), std::string::npos);
    EXPECT_EQ(outcome.diagnostics[0].find('\n'), std::string::npos);
}

TEST(ToolCallParser, MalformedSuffixAfterGoodCallsIsDiscarded) {
    std::string good = call_markup("get_weather", {{"city", "Oslo"}}) + "\n" +
                       call_markup("get_weather", {{"city", "Bergen"}});
    for (std::string suffix :
         {"\n<tool_call>\n<function=get_weather>\n<parameter=ci",
          "\n<tool_call>\n<function=get_weather>\n<parameter=city>\nTromsø",
          "\n<tool_call>\n<oops>", "\n<tool_call>", "\n<tool_call>\n<function=bad\nname>",
          "</tool_call></tool_call>garbage"}) {
        Outcome outcome = parse_every_split(good + suffix);
        EXPECT_EQ(outcome.content, "") << suffix;
        ASSERT_EQ(outcome.calls.size(), 2u) << suffix;
        EXPECT_EQ(outcome.calls[1].arguments, R"({"city":"Bergen"})") << suffix;
        ASSERT_EQ(outcome.diagnostics.size(), 1u) << suffix;
        EXPECT_NE(outcome.diagnostics[0].find("discarded"), std::string::npos) << suffix;
    }
}

TEST(ToolCallParser, WellFormedCallAfterDiscardedTextIsStillParsed) {
    std::string text = call_markup("get_weather", {{"city", "Oslo"}}) + "\nAnd also:\n" +
                       call_markup("get_weather", {{"city", "Rome"}});
    Outcome outcome = parse_every_split(text);
    ASSERT_EQ(outcome.calls.size(), 2u);
    EXPECT_EQ(outcome.calls[1].arguments, R"({"city":"Rome"})");
    EXPECT_TRUE(any_diagnostic_contains(outcome, "\"And also:"));
}

TEST(ToolCallParser, UnrecoverableRegionIsReturnedVerbatim) {
    for (std::string text : {
             "Wrap calls in <tool_call> tags.",
             "Answer:\n<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
             "x <tool_call>\n<function=",
             "x <tool_call>\n<function=get_weather",
             "<tool_call><tool_call>",
             "<tool_call>\n<function=>\n</function>",
             "<tool_call>\n<function=get_weather>\n<parameter=>x</parameter>",
             "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n<param",
         }) {
        Outcome outcome = parse_every_split(text);
        EXPECT_EQ(outcome.content, text);
        EXPECT_TRUE(outcome.calls.empty()) << text;
        EXPECT_TRUE(any_diagnostic_contains(outcome, "returned as content")) << text;
    }
}

TEST(ToolCallParser, FailedRegionThenRealCall) {
    std::string text =
        "Note: <tool_call> starts a call.\n\n" + call_markup("get_weather", {{"city", "Kyiv"}});
    Outcome outcome = parse_every_split(text);
    EXPECT_EQ(outcome.content, "Note: <tool_call> starts a call.");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].arguments, R"({"city":"Kyiv"})");
}

TEST(ToolCallParser, MarkerRightAfterFailedMarkerStartsTheCall) {
    std::string text = "<tool_call>\n" + call_markup("list_files", {});
    Outcome outcome = parse_every_split(text);
    EXPECT_EQ(outcome.content, "<tool_call>");
    ASSERT_EQ(outcome.calls.size(), 1u);
}

TEST(ToolCallParser, ParameterCloseInsideValueFollowedByTextBelongsToValue) {
    std::string value = "a </parameter> b\n</parameter>\nnot a tag\n</parameter>x";
    Outcome outcome = parse_every_split(call_markup("write_file", {{"content", value}}));
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(arguments_of(outcome.calls[0])["content"], value);
    EXPECT_TRUE(outcome.diagnostics.empty());
}

TEST(ToolCallParser, ParameterCloseFollowedByOtherTagLookalikeBelongsToValue) {
    std::string value = "x\n</parameter>\n</paragraph>\n</parameter> <tool>";
    Outcome outcome = parse_every_split(call_markup("write_file", {{"content", value}}));
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(arguments_of(outcome.calls[0])["content"], value);
}

TEST(ToolCallParser, ValueEndsAtFirstCloseWhenOutputEndsWithoutAValidEnding) {
    Outcome outcome = parse_every_split(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "That is the call.");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].arguments, R"({"city":"Oslo"})");
    ASSERT_EQ(outcome.diagnostics.size(), 1u);
    EXPECT_NE(outcome.diagnostics[0].find("\"That is the call."), std::string::npos);
}

TEST(ToolCallParser, NextCallWithoutClosingTagsEndsThePreviousOne) {
    std::string text =
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n"
        "<function=list_files>\n</function>\n</tool_call>";
    Outcome outcome = parse_every_split(text);
    ASSERT_EQ(outcome.calls.size(), 3u);
    EXPECT_EQ(outcome.calls[0].arguments, R"({"city":"Oslo"})");
    EXPECT_EQ(outcome.calls[1].arguments, R"({"city":"Rome"})");
    EXPECT_EQ(outcome.calls[2].name, "list_files");
    EXPECT_TRUE(outcome.diagnostics.empty());
}

TEST(ToolCallParser, TwoFunctionsInOneToolCallBlock) {
    std::string text =
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
        "<function=list_files>\n</function>\n</tool_call>";
    Outcome outcome = parse_every_split(text);
    ASSERT_EQ(outcome.calls.size(), 2u);
    EXPECT_EQ(outcome.calls[1].name, "list_files");
}

TEST(ToolCallParser, ClosingToolCallWithoutClosingFunction) {
    Outcome outcome = parse_every_split(
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</tool_call>");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_TRUE(outcome.diagnostics.empty());
}

TEST(ToolCallParser, NamesAreTrimmed) {
    Outcome outcome = parse_every_split(
        "<tool_call> <function= get_weather >\n<parameter= city >\nOslo\n</parameter></function>");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].name, "get_weather");
    EXPECT_EQ(outcome.calls[0].arguments, R"({"city":"Oslo"})");
}

TEST(ToolCallParser, UnknownFunctionIsKeptWithDiagnostic) {
    Outcome outcome =
        parse_every_split(call_markup("delete_everything", {{"force", "true"}, {"n", "3"}}));
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].name, "delete_everything");
    EXPECT_EQ(outcome.calls[0].arguments, R"({"force":"true","n":"3"})");
    ASSERT_EQ(outcome.diagnostics.size(), 1u);
    EXPECT_NE(outcome.diagnostics[0].find("not among the request's tools"), std::string::npos);
}

TEST(ToolCallParser, UndeclaredAndRepeatedParametersGetDiagnostics) {
    Outcome outcome = parse_every_split(
        call_markup("get_weather", {{"city", "A"}, {"mood", "5"}, {"city", "B"}}));
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(outcome.calls[0].arguments, R"({"mood":"5","city":"B"})");
    EXPECT_TRUE(any_diagnostic_contains(outcome, "not declared"));
    EXPECT_TRUE(any_diagnostic_contains(outcome, "more than once"));
}

TEST(ToolCallParser, ConvertsEachDeclaredType) {
    Outcome outcome = parse_every_split(call_markup("typed", {{"s", "007"},
                                                              {"i", "42"},
                                                              {"n", "2.5"},
                                                              {"b", "True"},
                                                              {"z", "null"},
                                                              {"o", "{\"k\": [1, 2]}"},
                                                              {"a", "[\"x\", {\"y\": null}]"},
                                                              {"si", "12"},
                                                              {"on", "None"},
                                                              {"any", "[1]"}}));
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(arguments_of(outcome.calls[0]), Json::parse(R"({"s":"007","i":42,"n":2.5,"b":true,
        "z":null,"o":{"k":[1,2]},"a":["x",{"y":null}],"si":12,"on":null,"any":"[1]"})"));
    EXPECT_TRUE(outcome.diagnostics.empty());
}

TEST(ToolCallParser, TypeMismatchKeepsStringWithDiagnostic) {
    Outcome outcome = parse_every_split(call_markup("typed", {{"i", "forty-two"},
                                                              {"n", "1,5"},
                                                              {"b", "yes"},
                                                              {"o", "[1]"},
                                                              {"a", "{}"},
                                                              {"z", "nil"},
                                                              {"on", "many"},
                                                              {"si", "1.5"}}));
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(arguments_of(outcome.calls[0]),
              Json::parse(R"({"i":"forty-two","n":"1,5","b":"yes","o":"[1]","a":"{}","z":"nil",
                  "on":"many","si":"1.5"})"));
    EXPECT_EQ(outcome.diagnostics.size(), 7u);  // "si" allows string
    EXPECT_TRUE(any_diagnostic_contains(outcome, "expects integer, got \"forty-two\""));
    EXPECT_TRUE(any_diagnostic_contains(outcome, "expects null or number, got \"many\""));
}

TEST(ToolCallParser, StripsOnlyOneTemplateNewline) {
    Outcome outcome = parse_every_split(
        "<tool_call>\n<function=write_file>\n<parameter=content>\n\n  indented\n\n</parameter>\n"
        "<parameter=path>x</parameter>\n</function>");
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(arguments_of(outcome.calls[0])["content"], "\n  indented\n");
    EXPECT_EQ(arguments_of(outcome.calls[0])["path"], "x");
}

TEST(ToolCallParser, LongFileContentWithTagLookalikes) {
    // ~60 KB of code full of '<', '</', '</param' and '</parameter>' followed by text.
    std::string value;
    for (int line = 0; value.size() < 60000; ++line) {
        value += "if (a < b && c </ d) { emit(\"</param\" + std::to_string(" +
                 std::to_string(line) + ")); } // </parameter> not the end <parameter\n";
        if (line % 7 == 0) value += "<div></div></paragraph></parameter>x\n";
    }
    std::string text = "Writing the file.\n" +
                       call_markup("write_file", {{"path", "src/big.cpp"}, {"content", value}});
    Outcome whole = parse_whole(text);
    ASSERT_EQ(whole.calls.size(), 1u);
    EXPECT_EQ(whole.content, "Writing the file.");
    EXPECT_EQ(arguments_of(whole.calls[0])["content"], value);
    EXPECT_TRUE(whole.diagnostics.empty());

    for (size_t split : {size_t{1}, text.size() / 3, text.size() / 2, text.size() - 20}) {
        EXPECT_TRUE(parse_chunks({std::string_view(text).substr(0, split),
                                  std::string_view(text).substr(split)}) == whole);
    }
    // Byte by byte, the way a detokenizer may feed it; quadratic work would show here.
    std::vector<std::string_view> bytes;
    for (size_t at = 0; at < text.size(); ++at)
        bytes.push_back(std::string_view(text).substr(at, 1));
    EXPECT_TRUE(parse_chunks(bytes) == whole);
}

TEST(ToolCallParser, LongUnterminatedValueIsReturnedAsContent) {
    std::string text =
        "<tool_call>\n<function=write_file>\n<parameter=content>\n" + std::string(50000, '<');
    std::vector<std::string_view> bytes;
    for (size_t at = 0; at < text.size(); ++at)
        bytes.push_back(std::string_view(text).substr(at, 1));
    Outcome outcome = parse_chunks(bytes);
    EXPECT_EQ(outcome.content, text);
    EXPECT_TRUE(outcome.calls.empty());
}

TEST(ToolCallParser, IdsAreDeterministicPerSeed) {
    std::string text = call_markup("list_files", {}) + call_markup("list_files", {});
    Outcome first = parse_chunks({text}, 1234);
    Outcome again = parse_chunks({text}, 1234);
    Outcome other = parse_chunks({text}, 1235);
    ASSERT_EQ(first.calls.size(), 2u);
    EXPECT_EQ(first.calls[0].id, again.calls[0].id);
    EXPECT_EQ(first.calls[1].id, again.calls[1].id);
    EXPECT_NE(first.calls[0].id, first.calls[1].id);
    EXPECT_NE(first.calls[0].id, other.calls[0].id);
    EXPECT_EQ(first.calls[0].id, tool_call_id(1234, 0));
    EXPECT_EQ(first.calls[0].id.size(), 5u + 24u);
    EXPECT_EQ(first.calls[0].id.rfind("call_", 0), 0u);
}

TEST(ToolCallParser, CallSerializesInOpenAiForm) {
    Outcome outcome = parse_whole(call_markup("get_weather", {{"city", "Oslo"}}));
    ASSERT_EQ(outcome.calls.size(), 1u);
    Json json = tool_call_to_json(outcome.calls[0]);
    EXPECT_EQ(json["type"], "function");
    EXPECT_EQ(json["id"], outcome.calls[0].id);
    EXPECT_EQ(json["function"]["name"], "get_weather");
    EXPECT_EQ(json["function"]["arguments"], R"({"city":"Oslo"})");
}

TEST(ToolCallParser, InvalidUtf8InValuesBecomesReplacementCharacters) {
    Outcome outcome = parse_every_split(call_markup("write_file", {{"content",
                                                                    "a\xff"
                                                                    "b\xe2\x82"}}));
    ASSERT_EQ(outcome.calls.size(), 1u);
    EXPECT_EQ(arguments_of(outcome.calls[0])["content"],
              "a\xEF\xBF\xBD"
              "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(ToolCallParser, PushAfterFinishIsAnInternalError) {
    ToolCallParser parser(harness::test_tools());
    parser.finish();
    try {
        parser.push("x");
        FAIL() << "expected an error";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Internal);
    }
}

}  // namespace
}  // namespace cherenkov::text
