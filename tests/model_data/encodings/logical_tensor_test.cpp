#include "model_data/encodings/logical_tensor.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace cherenkov::model_data {
namespace {

using nlohmann::json;

QuantizationConfig parse(const json& config) {
    auto parsed = parse_quantization_config(config, "config.json");
    EXPECT_TRUE(parsed.has_value());
    return *parsed;
}

std::vector<StoredTensor> mlx_linear(const std::string& module, uint64_t out, uint64_t in, int bits, int group) {
    return {{module + ".weight", Dtype::U32, {out, in * static_cast<uint64_t>(bits) / 32}},
            {module + ".scales", Dtype::BF16, {out, in / static_cast<uint64_t>(group)}},
            {module + ".biases", Dtype::BF16, {out, in / static_cast<uint64_t>(group)}}};
}

TEST(QuantizationConfig, ReadsDefaultsOverridesAndFalse) {
    QuantizationConfig config = parse(json{{"quantization",
                                            {{"group_size", 64},
                                             {"bits", 4},
                                             {"mode", "affine"},
                                             {"model.layers.0.mlp.gate", {{"group_size", 64}, {"bits", 8}}},
                                             {"lm_head", false}}}});
    EXPECT_EQ(config.defaults.bits, 4);
    EXPECT_EQ(config.params_for("model.layers.0.mlp.gate")->bits, 8);
    EXPECT_FALSE(config.params_for("lm_head").has_value());
    EXPECT_EQ(config.params_for("model.embed_tokens")->group_size, 64);
}

TEST(QuantizationConfig, FallsBackToQuantizationConfigButNotHfMethods) {
    EXPECT_EQ(parse(json{{"quantization_config", {{"group_size", 32}, {"bits", 4}}}}).defaults.group_size, 32);
    EXPECT_FALSE(parse_quantization_config(json{{"quantization_config", {{"quant_method", "fp8"}}}}, "c").has_value());
    EXPECT_FALSE(parse_quantization_config(json::object(), "c").has_value());
}

TEST(QuantizationConfig, RejectsInvalidParametersNamingTheKey) {
    auto expect_message = [](const json& config, const std::string& fragment) {
        try {
            parse_quantization_config(config, "config.json");
            FAIL() << config.dump();
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
        }
    };
    expect_message(json{{"quantization", {{"bits", 7}, {"group_size", 64}}}}, "quantization.bits");
    expect_message(json{{"quantization", {{"bits", 4}, {"group_size", 48}}}}, "quantization.group_size");
    expect_message(json{{"quantization", {{"bits", "4"}}}}, "quantization.bits");
    expect_message(json{{"quantization", {{"bits", 4}, {"mode", "int4"}}}}, "quantization.mode");
    expect_message(json{{"quantization", {{"bits", 4}, {"x.y", true}}}}, "quantization.x.y");
    expect_message(json{{"quantization", {{"bits", 4}, {"x.y", {{"bits", 9}}}}}}, "quantization.x.y.bits");
    expect_message(json{{"quantization", 4}}, "quantization");
}

TEST(LogicalTensor, AssemblesQuantizedModulesAndKeepsDenseTensors) {
    std::vector<StoredTensor> tensors = mlx_linear("model.layers.0.mlp.gate", 8, 128, 8, 64);
    auto more = mlx_linear("model.embed_tokens", 256, 128, 4, 64);
    tensors.insert(tensors.end(), more.begin(), more.end());
    tensors.push_back({"model.norm.weight", Dtype::BF16, {128}});
    QuantizationConfig config = parse(json{{"quantization",
                                            {{"group_size", 64}, {"bits", 4},
                                             {"model.layers.0.mlp.gate", {{"group_size", 64}, {"bits", 8}}}}}});
    auto logical = assemble_logical_tensors(tensors, config, "ckpt");
    ASSERT_EQ(logical.size(), 3u);
    EXPECT_EQ(logical[0].name, "model.layers.0.mlp.gate.weight");
    EXPECT_EQ(logical[0].kind, EncodingKind::MlxQuantized);
    EXPECT_EQ(logical[0].shape, (std::vector<uint64_t>{8, 128}));
    EXPECT_EQ(logical[0].params.bits, 8);
    EXPECT_EQ(logical[1].shape, (std::vector<uint64_t>{256, 128}));
    EXPECT_EQ(logical[2].kind, EncodingKind::Dense);
    EXPECT_EQ(logical[2].dtype, Dtype::BF16);
}

TEST(LogicalTensor, StackedExpertsKeepLeadingDims) {
    std::vector<StoredTensor> tensors = {
        {"m.switch_mlp.down_proj.weight", Dtype::U32, {8, 64, 128 * 4 / 32}},
        {"m.switch_mlp.down_proj.scales", Dtype::BF16, {8, 64, 2}},
        {"m.switch_mlp.down_proj.biases", Dtype::BF16, {8, 64, 2}}};
    auto logical = assemble_logical_tensors(tensors, parse(json{{"quantization", {{"bits", 4}, {"group_size", 64}}}}), "c");
    ASSERT_EQ(logical.size(), 1u);
    EXPECT_EQ(logical[0].shape, (std::vector<uint64_t>{8, 64, 128}));
}

TEST(LogicalTensor, RejectsPartsThatDisagree) {
    QuantizationConfig config = parse(json{{"quantization", {{"bits", 4}, {"group_size", 64}}}});
    auto expect_message = [&](std::vector<StoredTensor> tensors, const std::string& fragment) {
        try {
            assemble_logical_tensors(tensors, config, "ckpt");
            FAIL() << fragment;
        } catch (const Error& error) {
            EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
        }
    };
    auto group32 = mlx_linear("a", 8, 128, 4, 32);  // config says 64
    expect_message(group32, "disagree with config.json");
    auto no_biases = mlx_linear("a", 8, 128, 4, 64);
    no_biases.pop_back();
    expect_message(no_biases, "no .biases");
    auto no_weight = mlx_linear("a", 8, 128, 4, 64);
    no_weight.erase(no_weight.begin());
    expect_message(no_weight, "no a.weight");
    auto float_weight = mlx_linear("a", 8, 128, 4, 64);
    float_weight[0].dtype = Dtype::BF16;
    expect_message(float_weight, "U32");
    auto bad_biases = mlx_linear("a", 8, 128, 4, 64);
    bad_biases[2].shape = {8, 3};
    expect_message(bad_biases, "biases");
    try {
        assemble_logical_tensors(mlx_linear("a", 8, 128, 4, 64), std::nullopt, "ckpt");
        FAIL();
    } catch (const Error& error) {
        EXPECT_NE(std::string(error.what()).find("no `quantization`"), std::string::npos);
    }
}

}  // namespace
}  // namespace cherenkov::model_data
