// The Qwen2/Qwen3 tokenizer against recorded reference ids: llama.cpp's 46 test vectors and
// transformers' integration vectors (tests/data/tokenizer-test-vectors-qwen2-*), for both
// ways of loading it, plus the added tokens and config ids listed in the recorded
// tokenizer_config.json.
#include <gtest/gtest.h>

#include <sstream>

#include "qwen_tokenizers.h"

namespace cherenkov::text {
namespace {

struct Vector {
    std::string text;
    std::vector<int32_t> ids;
};

std::vector<Vector> llama_cpp_vectors() {
    const std::string dir =
        std::string(CHERENKOV_SOURCE_DIR) + "/tests/data/tokenizer-test-vectors-qwen2-llamacpp";
    const std::string inputs = read_text_file(dir + "/ggml-vocab-qwen2.gguf.inp");
    const std::string outputs = read_text_file(dir + "/ggml-vocab-qwen2.gguf.out");
    const std::string separator = "\n__ggml_vocab_test__\n";
    std::vector<Vector> vectors;
    size_t start = 0;
    while (start < inputs.size()) {
        const size_t end = inputs.find(separator, start);
        if (end == std::string::npos) break;
        vectors.push_back({inputs.substr(start, end - start), {}});
        start = end + separator.size();
    }
    std::istringstream lines(outputs);
    std::string line;
    size_t index = 0;
    while (std::getline(lines, line) && index < vectors.size()) {
        std::istringstream ids(line);
        int32_t id = 0;
        while (ids >> id) vectors[index].ids.push_back(id);
        ++index;
    }
    EXPECT_EQ(index, vectors.size());
    return vectors;
}

std::vector<Vector> transformers_vectors() {
    const std::string path = std::string(CHERENKOV_SOURCE_DIR) +
                             "/tests/data/tokenizer-test-vectors-qwen2-transformers/"
                             "hf_transformers_qwen2_integration.json";
    const nlohmann::json document = nlohmann::json::parse(read_text_file(path));
    std::vector<Vector> vectors;
    for (const auto& entry : document.at("cases")) {
        vectors.push_back(
            {entry.at("text").get<std::string>(), entry.at("ids").get<std::vector<int32_t>>()});
    }
    return vectors;
}

class QwenVectors : public ::testing::TestWithParam<bool> {
protected:
    const Tokenizer& tokenizer() const {
        return GetParam() ? testing::qwen_from_tokenizer_json()
                          : testing::qwen_from_vocab_and_merges();
    }
};

TEST_P(QwenVectors, MatchesAllLlamaCppVectors) {
    const std::vector<Vector> vectors = llama_cpp_vectors();
    ASSERT_EQ(vectors.size(), 46u);
    for (const Vector& vector : vectors) {
        EXPECT_EQ(tokenizer().encode(vector.text), vector.ids) << "text: '" << vector.text << "'";
    }
}

TEST_P(QwenVectors, MatchesTransformersIntegrationVectors) {
    const std::vector<Vector> vectors = transformers_vectors();
    ASSERT_EQ(vectors.size(), 3u);
    for (const Vector& vector : vectors) {
        EXPECT_EQ(tokenizer().encode(vector.text), vector.ids) << "text: '" << vector.text << "'";
    }
}

TEST_P(QwenVectors, DecodeOfEncodeGivesBackTheText) {
    // Every llama.cpp input is already in NFC, so normalization leaves it unchanged.
    for (const Vector& vector : llama_cpp_vectors()) {
        EXPECT_EQ(tokenizer().decode(tokenizer().encode(vector.text)), vector.text);
    }
    for (const Vector& vector : transformers_vectors()) {
        EXPECT_EQ(tokenizer().decode(vector.ids), vector.text);
    }
}

TEST_P(QwenVectors, KnowsTheConfigTokens) {
    // tests/data/tokenizer-qwen2-qwen3/SOURCE.md lists the added tokens and config fields.
    EXPECT_EQ(tokenizer().vocab_size(), 151669u);
    EXPECT_EQ(tokenizer().eos_token_id(), 151645);
    EXPECT_EQ(tokenizer().pad_token_id(), 151643);
    EXPECT_EQ(tokenizer().token_id("<|im_start|>"), 151644);
    EXPECT_EQ(tokenizer().token_id("</think>"), 151668);
    EXPECT_TRUE(tokenizer().is_special(151644));
    EXPECT_FALSE(tokenizer().is_special(151667));  // <think> is added but not special
    EXPECT_EQ(tokenizer().token_text(151657), "<tool_call>");
}

TEST_P(QwenVectors, SplitsAddedTokensOutOfText) {
    const std::vector<int32_t> ids = tokenizer().encode("<|im_start|><think></think><|im_end|>");
    EXPECT_EQ(ids, (std::vector<int32_t>{151644, 151667, 151668, 151645}));
    const std::vector<int32_t> plain =
        tokenizer().encode("<|im_end|><think>", /*parse_special=*/false);
    ASSERT_FALSE(plain.empty());
    EXPECT_NE(plain.front(), 151645);  // the special token is spelled out
    EXPECT_EQ(plain.back(), 151667);   // a non-special added token still matches
    EXPECT_EQ(tokenizer().decode(plain), "<|im_end|><think>");
    EXPECT_EQ(tokenizer().decode(ids, /*skip_special=*/true), "<think></think>");
}

INSTANTIATE_TEST_SUITE_P(BothFormats, QwenVectors, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param_info) {
                             return param_info.param ? std::string("TokenizerJson")
                                                     : std::string("VocabAndMerges");
                         });

}  // namespace
}  // namespace cherenkov::text
