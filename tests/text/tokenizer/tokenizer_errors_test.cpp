// Malformed tokenizer files: every error names the file and the JSON field (or line) at fault.
// Also: invalid UTF-8 given to encode, and unknown ids given to decode.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::text {
namespace {

// A small valid byte-level BPE tokenizer.json; each test breaks one part of it.
nlohmann::json valid_tokenizer() {
    return nlohmann::json::parse(R"({
      "version": "1.0",
      "added_tokens": [
        {"id": 6, "content": "<|im_end|>", "single_word": false, "lstrip": false, "rstrip": false,
         "normalized": false, "special": true}
      ],
      "normalizer": {"type": "NFC"},
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\s+|\\w+"}, "behavior": "Isolated", "invert": false},
        {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
      ]},
      "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "dropout": null, "unk_token": null, "fuse_unk": false,
                "byte_fallback": false, "ignore_merges": false,
                "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "abc": 4, "Ġ": 5},
                "merges": [["a", "b"], ["ab", "c"]]}
    })");
}

struct Failure {
    ErrorKind kind;
    std::string message;
};

template <typename Function>
Failure failure_of(Function&& function) {
    try {
        function();
    } catch (const Error& e) {
        return {e.kind(), e.what()};
    }
    ADD_FAILURE() << "no error thrown";
    return {ErrorKind::Internal, ""};
}

Failure load_failure(const nlohmann::json& document) {
    return failure_of(
        [&] { Tokenizer::from_json(document.dump(), std::nullopt, "bad/tokenizer.json"); });
}

void expect_names(const Failure& failure, ErrorKind kind, const std::string& field) {
    EXPECT_EQ(failure.kind, kind) << failure.message;
    EXPECT_NE(failure.message.find("bad/tokenizer.json"), std::string::npos) << failure.message;
    EXPECT_NE(failure.message.find(field), std::string::npos) << failure.message;
}

TEST(TokenizerErrors, ValidTokenizerLoads) {
    const Tokenizer tokenizer = Tokenizer::from_json(valid_tokenizer().dump(), std::nullopt, "ok");
    EXPECT_EQ(tokenizer.encode("abc ab<|im_end|>"), (std::vector<int32_t>{4, 5, 2, 6}));
}

TEST(TokenizerErrors, BadJsonNamesTheFile) {
    const Failure failure = failure_of(
        [] { Tokenizer::from_json("{\"model\": ", std::nullopt, "bad/tokenizer.json"); });
    expect_names(failure, ErrorKind::Corrupt, "not valid JSON");
}

TEST(TokenizerErrors, MissingModel) {
    nlohmann::json document = valid_tokenizer();
    document.erase("model");
    expect_names(load_failure(document), ErrorKind::Corrupt, "model: missing");
}

TEST(TokenizerErrors, UnknownModelType) {
    nlohmann::json document = valid_tokenizer();
    document["model"]["type"] = "WordPiece";
    expect_names(load_failure(document), ErrorKind::Unsupported, "model.type");
}

TEST(TokenizerErrors, UnknownPreTokenizer) {
    nlohmann::json document = valid_tokenizer();
    document["pre_tokenizer"]["pretokenizers"][1] = {{"type", "Whitespace"}};
    expect_names(load_failure(document), ErrorKind::Unsupported,
                 "pre_tokenizer.pretokenizers[1].type");
}

TEST(TokenizerErrors, UnknownNormalizerAndDecoder) {
    nlohmann::json document = valid_tokenizer();
    document["normalizer"] = {{"type", "Lowercase"}};
    expect_names(load_failure(document), ErrorKind::Unsupported, "normalizer.type");
    document = valid_tokenizer();
    document["decoder"] = {{"type", "WordPiece"}};
    expect_names(load_failure(document), ErrorKind::Unsupported, "decoder.type");
}

TEST(TokenizerErrors, RefusesDeeplyNestedSequences) {
    nlohmann::json document = valid_tokenizer();
    nlohmann::json nested = {{"type", "ByteLevel"}};
    for (int depth = 0; depth < 40; ++depth) {
        nested = {{"type", "Sequence"}, {"pretokenizers", nlohmann::json::array({nested})}};
    }
    document["pre_tokenizer"] = nested;
    expect_names(load_failure(document), ErrorKind::Corrupt, "nested more than");
}

TEST(TokenizerErrors, RegexThatDoesNotCompile) {
    nlohmann::json document = valid_tokenizer();
    document["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
    expect_names(load_failure(document), ErrorKind::InvalidInput,
                 "pre_tokenizer.pretokenizers[0].pattern.Regex");
}

TEST(TokenizerErrors, BadMerges) {
    nlohmann::json document = valid_tokenizer();
    document["model"]["merges"] = nlohmann::json::array({"a b", "ab"});
    expect_names(load_failure(document), ErrorKind::Corrupt, "model.merges[1]");
    document["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"a", "zz"})});
    expect_names(load_failure(document), ErrorKind::Corrupt, "model.merges[0]");
    document["model"]["merges"] = nlohmann::json::array(
        {nlohmann::json::array({"b", "c"})});  // "bc" is not in the vocabulary
    expect_names(load_failure(document), ErrorKind::Corrupt, "model.merges[0]");
    document["model"]["merges"] = nlohmann::json::array({42});
    expect_names(load_failure(document), ErrorKind::Corrupt, "model.merges[0]");
}

TEST(TokenizerErrors, IdsOutOfRangeOrDuplicated) {
    nlohmann::json document = valid_tokenizer();
    document["model"]["vocab"]["c"] = -3;
    expect_names(load_failure(document), ErrorKind::Corrupt, "model.vocab");
    document["model"]["vocab"]["c"] = int64_t{1} << 40;
    expect_names(load_failure(document), ErrorKind::Corrupt, "out of range");
    document["model"]["vocab"]["c"] = 1;
    expect_names(load_failure(document), ErrorKind::Corrupt, "id 1 is used by both");
    document = valid_tokenizer();
    document["model"]["vocab"]["c"] = "three";
    expect_names(load_failure(document), ErrorKind::Corrupt, "model.vocab['c']");
}

TEST(TokenizerErrors, AddedTokenIdThatDoesNotResolve) {
    nlohmann::json document = valid_tokenizer();
    document["added_tokens"][0]["id"] = 9;
    expect_names(load_failure(document), ErrorKind::Corrupt, "added_tokens[0].id");
    document["added_tokens"][0]["id"] = 2;  // the id of vocabulary token "ab"
    expect_names(load_failure(document), ErrorKind::Corrupt, "added_tokens[0].id");
}

TEST(TokenizerErrors, ConfigErrorsNameTheConfig) {
    const Failure failure = failure_of([] {
        Tokenizer::from_json(valid_tokenizer().dump(), R"({"eos_token": "<missing>"})",
                             "bad/tokenizer.json");
    });
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    EXPECT_NE(failure.message.find("tokenizer_config.json"), std::string::npos) << failure.message;
    EXPECT_NE(failure.message.find("eos_token"), std::string::npos) << failure.message;
}

TEST(TokenizerErrors, VocabAndMergesFilesNameTheirLine) {
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / "cherenkov-tokenizer-errors";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "vocab.json") << R"({"a": 0, "b": 1, "ab": 2})";
    std::ofstream(dir / "merges.txt") << "#version: 0.2\na b\nab\n";
    const Failure failure = failure_of([&] { Tokenizer::load_directory(dir.string()); });
    EXPECT_EQ(failure.kind, ErrorKind::Corrupt);
    EXPECT_NE(failure.message.find("merges.txt: line 3"), std::string::npos) << failure.message;
    std::filesystem::remove_all(dir);
}

TEST(TokenizerErrors, MissingFilesAreNotFound) {
    const Failure failure =
        failure_of([] { Tokenizer::load_directory("/nonexistent/tokenizer-dir"); });
    EXPECT_EQ(failure.kind, ErrorKind::NotFound);
}

TEST(TokenizerErrors, InvalidUtf8NamesTheByteOffset) {
    const Tokenizer tokenizer = Tokenizer::from_json(valid_tokenizer().dump(), std::nullopt, "ok");
    const Failure failure = failure_of([&] { tokenizer.encode("abc\xC3(ab"); });
    EXPECT_EQ(failure.kind, ErrorKind::InvalidInput);
    EXPECT_NE(failure.message.find("byte 3"), std::string::npos) << failure.message;
}

TEST(TokenizerErrors, DecodeNamesAnUnknownId) {
    const Tokenizer tokenizer = Tokenizer::from_json(valid_tokenizer().dump(), std::nullopt, "ok");
    const std::vector<int32_t> ids = {0, 1, 77};
    const Failure failure = failure_of([&] { tokenizer.decode(ids); });
    EXPECT_EQ(failure.kind, ErrorKind::InvalidInput);
    EXPECT_NE(failure.message.find("77"), std::string::npos) << failure.message;
}

}  // namespace
}  // namespace cherenkov::text
