// qwen4_exp config parsing: the FN and tiny configs of docs/qwen4_exp.md §1.2 / §7, both forms,
// HF defaults, and every §1.3 rule rejected with the file and field named.
#include "model_data/qwen4_exp/config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "base/error.h"
#include "model_data/qwen4_exp/tiny_config.h"

namespace cherenkov::model_data::qwen4_exp {
namespace {

using nlohmann::json;

// Qwen3.8-Flash-Next, from the FN column of §1.2 (nested form, as real checkpoints ship it).
constexpr const char* kFnConfig = R"json({
  "architectures": ["Qwen4ExpForConditionalGeneration"],
  "model_type": "qwen4_exp",
  "tie_word_embeddings": false,
  "image_token_id": 248056,
  "video_token_id": 248057,
  "vision_config": {"depth": 27, "hidden_size": 1152},
  "text_config": {
    "model_type": "qwen4_exp_text",
    "vocab_size": 248320,
    "hidden_size": 2560,
    "num_hidden_layers": 48,
    "num_attention_heads": 24,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-06,
    "tie_word_embeddings": false,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0,
                        "partial_rotary_factor": 0.25, "mrope_section": [11, 11, 10],
                        "mrope_interleaved": true},
    "attention_bias": false,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_num_key_heads": 16,
    "linear_num_value_heads": 48,
    "num_experts": 512,
    "num_experts_per_tok": 10,
    "moe_intermediate_size": 640,
    "shared_expert_intermediate_size": 640,
    "norm_topk_prob": true,
    "layer_types": [
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention",
      "linear_attention", "linear_attention", "linear_attention", "full_attention"],
    "full_attention_interval": 4,
    "eos_token_id": 248044,
    "hc_count": 4,
    "hc_lowrank": 320,
    "ple_layer_ids": [2],
    "ple_embed_dim": 2560,
    "ple_conv_kernel_size": 4,
    "ngram_size": 3,
    "heads_per_ngram": 8,
    "ngram_vocab_size_base": 20000000,
    "make_ngram_vocab_size_divisible_by": 128,
    "split_ngram_parts": 128,
    "indexer_n_heads": 4,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 128,
    "indexer_budget": 2048,
    "indexer_compress_ratio": 4,
    "output_gate_type": "sigmoid",
    "mtp_num_hidden_layers": 1,
    "mtp_use_dedicated_embeddings": false,
    "max_position_embeddings": 262144,
    "attn_output_gate": true,
    "dtype": "bfloat16"
  }
})json";

using testing::tiny_flat;

// The same text config wrapped as a Qwen4ExpForConditionalGeneration config.
json tiny_nested() {
    json text = tiny_flat();
    text.erase("architectures");
    text["model_type"] = "qwen4_exp_text";
    return {{"architectures", {"Qwen4ExpForConditionalGeneration"}},
            {"model_type", "qwen4_exp"},
            {"text_config", text}};
}

Config parse(const json& document) {
    return parse_config(document, "config.json");
}

// Expects rejection with a message naming config.json and `field`, and the given kind.
void expect_rejected(const json& document, const std::string& field,
                     ErrorKind kind = ErrorKind::InvalidInput) {
    try {
        parse(document);
        ADD_FAILURE() << "accepted a config that should fail on " << field;
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), kind) << error.what();
        EXPECT_NE(std::string(error.what()).find("config.json: " + field + ":"), std::string::npos)
            << "message '" << error.what() << "' does not name " << field;
    }
}

// Applies `edit` to the flat tiny config and expects rejection naming `field`.
template <typename Edit>
void expect_flat_rejected(Edit edit, const std::string& field,
                          ErrorKind kind = ErrorKind::InvalidInput) {
    json document = tiny_flat();
    edit(document);
    expect_rejected(document, field, kind);
}

TEST(Qwen4ExpConfig, ParsesFnConfigWithDerivedValues) {
    const Config config = parse_config(std::string_view(kFnConfig), "config.json");
    EXPECT_EQ(config.form, ConfigForm::Nested);
    EXPECT_EQ(config.architecture, "Qwen4ExpForConditionalGeneration");
    EXPECT_EQ(config.model_type, "qwen4_exp");
    EXPECT_EQ(config.hidden_size, 2560);
    EXPECT_EQ(config.num_hidden_layers, 48);
    EXPECT_EQ(config.linear_num_value_heads, 48);
    EXPECT_EQ(config.moe_intermediate_size, 640);
    EXPECT_EQ(config.split_ngram_parts, 128);
    EXPECT_EQ(config.seed, 1234u);  // absent → HF default
    EXPECT_EQ(config.eos_token_ids, std::vector<int64_t>{248044});
    EXPECT_EQ(config.output_gate, GateActivation::Sigmoid);
    EXPECT_DOUBLE_EQ(config.rope.rope_theta, 1e7);
    EXPECT_TRUE(config.layer_types_given);

    // §1.4, FN column.
    ASSERT_EQ(config.layer_types.size(), 48u);
    int n_qsa = 0;
    for (size_t layer = 0; layer < 48; ++layer) {
        const bool qsa = (layer + 1) % 4 == 0;  // indices 3, 7, ..., 47
        EXPECT_EQ(config.layer_types[layer],
                  qsa ? LayerType::QwenSparseAttention : LayerType::LinearAttention)
            << layer;
        n_qsa += qsa;
    }
    EXPECT_EQ(n_qsa, 12);
    EXPECT_EQ(config.rotary_dim, 64);
    EXPECT_EQ(config.block_topk, 512);
    EXPECT_EQ(config.key_dim, 2048);
    EXPECT_EQ(config.value_dim, 6144);
    EXPECT_EQ(config.conv_dim, 10240);
    EXPECT_EQ(config.gqa_group, 12);
    EXPECT_EQ(config.gdn_head_ratio, 3);
    ASSERT_EQ(config.ple_layer_index.size(), 48u);
    EXPECT_EQ(config.ple_layer_index[1], 0);
    EXPECT_FALSE(config.ple_layer_index[0].has_value());
    EXPECT_FALSE(config.ple_layer_index[2].has_value());
    EXPECT_EQ(config.n_ngram_heads, 16);
    EXPECT_EQ(config.ngram_head_dim, 160);
    EXPECT_EQ(config.ple_conv_state_len, 9);
    EXPECT_EQ(config.ngram_context_len, 2);
    EXPECT_EQ(config.n_conv_states, 3);
    EXPECT_EQ(config.mtp_num_hidden_layers, 1);
    EXPECT_FALSE(config.mtp_use_dedicated_embeddings);
    // vision_config and the token ids are known keys; nothing is unrecognized.
    EXPECT_TRUE(config.unrecognized_keys.empty());
}

TEST(Qwen4ExpConfig, FlatAndNestedFormsAreEquivalent) {
    const Config flat = parse(tiny_flat());
    const Config nested = parse(tiny_nested());
    EXPECT_EQ(flat.form, ConfigForm::Flat);
    EXPECT_EQ(nested.form, ConfigForm::Nested);
    const json flat_json = config_to_json(flat);
    const json nested_json = config_to_json(nested);
    EXPECT_EQ(flat_json["text_config"], nested_json["text_config"]);
    EXPECT_EQ(flat_json["derived"], nested_json["derived"]);
    EXPECT_EQ(flat.architecture, "Qwen4ExpForCausalLM");
    EXPECT_EQ(nested.architecture, "Qwen4ExpForConditionalGeneration");
}

TEST(Qwen4ExpConfig, TinyConfigDerivedValues) {
    const Config config = parse(tiny_flat());
    EXPECT_EQ(config.rotary_dim, 8);
    EXPECT_EQ(config.block_topk, 2);
    EXPECT_EQ(config.key_dim, 32);
    EXPECT_EQ(config.value_dim, 64);
    EXPECT_EQ(config.conv_dim, 128);
    EXPECT_EQ(config.n_ngram_heads, 4);
    EXPECT_EQ(config.ngram_head_dim, 16);
    EXPECT_EQ(config.hc_width(), 256);
    EXPECT_EQ(config.ple_layer_index[1], 0);
    EXPECT_EQ(config.rope.mrope_section, (std::vector<int64_t>{2, 1, 1}));
}

TEST(Qwen4ExpConfig, MinimalFlatConfigTakesHfDefaults) {
    const Config config = parse(json::parse(R"({"model_type": "qwen4_exp_text",
        "hidden_size": 2048, "num_hidden_layers": 40, "rope_parameters": {"rope_theta": 1e7}})"));
    EXPECT_EQ(config.vocab_size, 248320);
    EXPECT_EQ(config.num_attention_heads, 16);
    EXPECT_EQ(config.num_key_value_heads, 2);
    EXPECT_EQ(config.head_dim, 256);
    EXPECT_EQ(config.linear_num_value_heads, 32);
    EXPECT_EQ(config.num_experts, 512);
    EXPECT_EQ(config.num_experts_per_tok, 10);
    EXPECT_EQ(config.hc_lowrank, 320);
    EXPECT_EQ(config.split_ngram_parts, 512);
    EXPECT_EQ(config.ngram_vocab_size_base, 20000000);
    EXPECT_EQ(config.ple_embed_dim, 2048);  // null → H
    EXPECT_FALSE(config.has_ple());
    EXPECT_FALSE(config.has_indexer());
    EXPECT_EQ(config.block_topk, 0);
    EXPECT_EQ(config.n_conv_states, 1);
    EXPECT_EQ(config.mtp_num_hidden_layers, 0);
    EXPECT_DOUBLE_EQ(config.rope.partial_rotary_factor, 1.0);
    EXPECT_EQ(config.rotary_dim, 256);
    EXPECT_EQ(config.output_gate, GateActivation::Silu);  // null → hidden_act
    EXPECT_FALSE(config.rope.mrope_section.has_value());
    ASSERT_EQ(config.layer_types.size(), 40u);
    EXPECT_EQ(config.layer_types[3], LayerType::QwenSparseAttention);
    EXPECT_EQ(config.layer_types[4], LayerType::LinearAttention);
}

TEST(Qwen4ExpConfig, DerivesLayerTypesFromInterval) {
    json document = tiny_flat();
    document.erase("layer_types");
    document["full_attention_interval"] = 2;
    document["ple_layer_ids"] = {1};
    const Config config = parse(document);
    EXPECT_FALSE(config.layer_types_given);
    EXPECT_EQ(config.layer_types,
              (std::vector<LayerType>{LayerType::LinearAttention, LayerType::QwenSparseAttention,
                                      LayerType::LinearAttention, LayerType::QwenSparseAttention}));
    document["layer_types"] = nullptr;  // explicit null derives too
    EXPECT_EQ(parse(document).layer_types, config.layer_types);
}

TEST(Qwen4ExpConfig, MapsFullAttentionToQsa) {
    json document = tiny_flat();
    document["layer_types"] = {"linear_attention", "linear_attention", "full_attention",
                               "full_attention"};
    const Config config = parse(document);
    EXPECT_EQ(config.layer_types[2], LayerType::QwenSparseAttention);
    EXPECT_EQ(config.layer_types[3], LayerType::QwenSparseAttention);
}

TEST(Qwen4ExpConfig, NestedSplitNgramPartsWinsAndTieComesFromEitherLevel) {
    json document = tiny_nested();
    document["split_ngram_parts"] = 7;
    EXPECT_EQ(parse(document).split_ngram_parts, 3);
    document["text_config"].erase("split_ngram_parts");
    EXPECT_EQ(parse(document).split_ngram_parts, 7);

    EXPECT_FALSE(parse(document).tie_word_embeddings);
    document["tie_word_embeddings"] = true;
    EXPECT_TRUE(parse(document).tie_word_embeddings);
    document["tie_word_embeddings"] = false;
    document["text_config"]["tie_word_embeddings"] = true;
    EXPECT_TRUE(parse(document).tie_word_embeddings);
}

TEST(Qwen4ExpConfig, RopeFallsBackToTextLevelFields) {
    json document = tiny_flat();
    document.erase("rope_parameters");
    document["rope_theta"] = 500000;
    document["partial_rotary_factor"] = 0.5;
    const Config config = parse(document);
    EXPECT_DOUBLE_EQ(config.rope.rope_theta, 500000.0);
    EXPECT_EQ(config.rotary_dim, 16);
    EXPECT_EQ(config.rope.rope_type, "default");

    // rope_parameters wins over the fallback; "type" spells rope_type in some exports.
    document["rope_parameters"] = {{"type", "default"}, {"rope_theta", 1000}};
    const Config nested = parse(document);
    EXPECT_DOUBLE_EQ(nested.rope.rope_theta, 1000.0);
    EXPECT_EQ(nested.rotary_dim, 16);
}

TEST(Qwen4ExpConfig, EosListFirstIsPleEos) {
    json document = tiny_flat();
    document["eos_token_id"] = {7, 2};
    const Config config = parse(document);
    EXPECT_EQ(config.eos_token_ids, (std::vector<int64_t>{7, 2}));
    EXPECT_EQ(config.first_eos(), 7);
}

TEST(Qwen4ExpConfig, NullHeadDimIsHiddenOverHeads) {
    json document = tiny_flat();
    document["head_dim"] = nullptr;
    document["rope_parameters"].erase("mrope_section");
    const Config config = parse(document);
    EXPECT_EQ(config.head_dim, 16);  // 64 / 4
    EXPECT_EQ(config.rotary_dim, 4);
}

TEST(Qwen4ExpConfig, PleIdsAreSortedAndDeduplicated) {
    json document = tiny_flat();
    document["ple_layer_ids"] = {2, 1, 2};
    const Config config = parse(document);
    EXPECT_EQ(config.ple_layer_ids, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(config.ple_layer_index[0], 0);
    EXPECT_EQ(config.ple_layer_index[1], 1);
}

TEST(Qwen4ExpConfig, KeepsUnknownKeysForReporting) {
    json document = tiny_nested();
    document["text_config"]["brand_new_knob"] = 3;
    document["extra_top"] = true;
    const Config config = parse(document);
    EXPECT_EQ(config.unrecognized_keys,
              (std::vector<std::string>{"extra_top", "text_config.brand_new_knob"}));
    EXPECT_EQ(config.source["text_config"]["brand_new_knob"], 3);
    EXPECT_EQ(config_to_json(config)["unrecognized_keys"].size(), 2u);
}

TEST(Qwen4ExpConfig, NegativeSeedIsKeptAsTwosComplement) {
    json document = tiny_flat();
    document["seed"] = -1;
    EXPECT_EQ(parse(document).seed, ~uint64_t{0});
}

TEST(Qwen4ExpConfig, ConfigToJsonCarriesParsedAndDerivedValues) {
    const json out = config_to_json(parse_config(std::string_view(kFnConfig), "config.json"));
    EXPECT_EQ(out["model_type"], "qwen4_exp");
    EXPECT_EQ(out["form"], "nested");
    EXPECT_EQ(out["text_config"]["hidden_size"], 2560);
    EXPECT_EQ(out["text_config"]["qsa_indexer"]["indexer_budget"], 2048);
    EXPECT_EQ(out["derived"]["conv_dim"], 10240);
    EXPECT_EQ(out["derived"]["layer_types"][3], "qwen_sparse_attention");
    EXPECT_EQ(out["derived"]["n_qwen_sparse_attention_layers"], 12);
    EXPECT_EQ(out["derived"]["ple_layer_index"][1], 0);
    EXPECT_TRUE(out["derived"]["ple_layer_index"][0].is_null());
    EXPECT_EQ(out["derived"]["ple_eos_token_id"], 248044);
}

// Real Qwen3.5 config.json files (tests/data/config-examples) have the same field shapes: with the
// model types renamed they parse, and as shipped they are rejected by model_type.
TEST(Qwen4ExpConfig, RealQwen35ConfigShapes) {
    for (const char* file : {"Qwen3.5-9B-MLX-8bit.mlx-community-mirror.config.json",
                             "Qwen3.5-2B-finetune-MLX-bf16.config.json"}) {
        std::ifstream in(std::string(CHERENKOV_SOURCE_DIR) + "/tests/data/config-examples/" + file);
        ASSERT_TRUE(in) << file;
        std::stringstream text;
        text << in.rdbuf();
        json document = json::parse(text.str());
        expect_rejected(document, "model_type", ErrorKind::Unsupported);
        document["model_type"] = "qwen4_exp";
        document["text_config"]["model_type"] = "qwen4_exp_text";
        const Config config = parse(document);
        EXPECT_EQ(config.form, ConfigForm::Nested);
        EXPECT_EQ(config.rotary_dim, 64);
        EXPECT_EQ(config.layer_types[3], LayerType::QwenSparseAttention);
        EXPECT_EQ(config.first_eos(), 248044);
        EXPECT_EQ(config.mtp_num_hidden_layers, 1);
    }
}

// §1.3, one test per rule group; each names the offending field.
TEST(Qwen4ExpConfigRejects, LayerTypes) {
    expect_flat_rejected([](json& d) { d["layer_types"].erase(3); }, "layer_types");
    expect_flat_rejected([](json& d) { d["layer_types"][1] = "sliding_attention"; },
                         "layer_types[1]");
    expect_flat_rejected([](json& d) { d["layer_types"][0] = 5; }, "layer_types[0]");
    expect_flat_rejected(
        [](json& d) {
            d.erase("layer_types");
            d["full_attention_interval"] = 0;
        },
        "full_attention_interval");
}

TEST(Qwen4ExpConfigRejects, GateAndHyperConnections) {
    expect_flat_rejected([](json& d) { d["output_gate_type"] = "gelu"; }, "output_gate_type");
    expect_flat_rejected(
        [](json& d) {
            d["output_gate_type"] = nullptr;
            d["hidden_act"] = "gelu";
        },
        "hidden_act");
    expect_flat_rejected([](json& d) { d["hidden_act"] = "gelu"; }, "hidden_act",
                         ErrorKind::Unsupported);
    expect_flat_rejected([](json& d) { d["hc_count"] = 1; }, "hc_count");
}

TEST(Qwen4ExpConfigRejects, Moe) {
    expect_flat_rejected([](json& d) { d["num_experts"] = 0; }, "num_experts");
    expect_flat_rejected([](json& d) { d["num_experts_per_tok"] = 0; }, "num_experts_per_tok");
    expect_flat_rejected([](json& d) { d["moe_intermediate_size"] = 0; }, "moe_intermediate_size");
    expect_flat_rejected([](json& d) { d["shared_expert_intermediate_size"] = -4; },
                         "shared_expert_intermediate_size");
    json document = tiny_nested();
    document["text_config"]["num_experts_per_tok"] = 12;
    try {
        parse(document);
        ADD_FAILURE() << "accepted k > E";
    } catch (const Error& error) {
        EXPECT_STREQ(error.what(),
                     "config.json: text_config.num_experts_per_tok: 12 exceeds num_experts 8");
    }
}

TEST(Qwen4ExpConfigRejects, QsaFields) {
    expect_flat_rejected([](json& d) { d.erase("indexer_head_dim"); }, "indexer_head_dim");
    expect_flat_rejected([](json& d) { d["indexer_budget"] = nullptr; }, "indexer_budget");
    expect_flat_rejected([](json& d) { d["indexer_n_heads"] = 0; }, "indexer_n_heads");
    expect_flat_rejected([](json& d) { d["indexer_kv_heads"] = 2; }, "indexer_kv_heads");
    expect_flat_rejected([](json& d) { d["indexer_budget"] = 10; }, "indexer_budget");
    expect_flat_rejected([](json& d) { d["indexer_head_dim"] = 4; }, "indexer_head_dim");
    // No QSA fields at all is the engine extension (dense causal attention).
    json document = tiny_flat();
    for (const char* key : {"indexer_n_heads", "indexer_kv_heads", "indexer_head_dim",
                            "indexer_budget", "indexer_compress_ratio"}) {
        document.erase(key);
    }
    EXPECT_FALSE(parse(document).has_indexer());
}

TEST(Qwen4ExpConfigRejects, Ple) {
    expect_flat_rejected([](json& d) { d["heads_per_ngram"] = 0; }, "heads_per_ngram");
    expect_flat_rejected([](json& d) { d["ple_embed_dim"] = 0; }, "ple_embed_dim");
    expect_flat_rejected([](json& d) { d["ple_embed_dim"] = 62; }, "ple_embed_dim");
    expect_flat_rejected([](json& d) { d["ple_layer_ids"] = {0}; }, "ple_layer_ids");
    expect_flat_rejected([](json& d) { d["ple_layer_ids"] = {5}; }, "ple_layer_ids");
    expect_flat_rejected([](json& d) { d["ple_layer_ids"] = {3}; }, "ple_layer_ids");
    expect_flat_rejected([](json& d) { d.erase("eos_token_id"); }, "eos_token_id");
    expect_flat_rejected([](json& d) { d["eos_token_id"] = json::array(); }, "eos_token_id");
    expect_flat_rejected([](json& d) { d["eos_token_id"] = 256; }, "eos_token_id");
    expect_flat_rejected([](json& d) { d["eos_token_id"] = {2, 300}; }, "eos_token_id[1]");
    // Without PLE the PLE rules do not apply.
    json document = tiny_flat();
    document["ple_layer_ids"] = json::array();
    document.erase("eos_token_id");
    document["ple_embed_dim"] = 62;
    EXPECT_FALSE(parse(document).has_ple());
}

TEST(Qwen4ExpConfigRejects, EngineSideChecks) {
    expect_flat_rejected([](json& d) { d["linear_num_value_heads"] = 5; },
                         "linear_num_value_heads");
    expect_flat_rejected([](json& d) { d["num_attention_heads"] = 3; }, "num_attention_heads");
    expect_flat_rejected([](json& d) { d["ngram_size"] = 1; }, "ngram_size");
    // D=32 · 0.28125 = 9: odd rotary_dim.
    expect_flat_rejected([](json& d) { d["rope_parameters"]["partial_rotary_factor"] = 0.28125; },
                         "rope_parameters.partial_rotary_factor");
    expect_flat_rejected(
        [](json& d) {
            d["rope_parameters"]["mrope_section"] = {2, 2, 1};
        },
        "rope_parameters.mrope_section");
}

TEST(Qwen4ExpConfigRejects, IdentityAndRope) {
    expect_flat_rejected([](json& d) { d["model_type"] = "qwen3_next"; }, "model_type",
                         ErrorKind::Unsupported);
    expect_flat_rejected([](json& d) { d.erase("model_type"); }, "model_type");
    expect_flat_rejected([](json& d) { d["architectures"] = "Qwen4ExpForCausalLM"; },
                         "architectures");
    expect_flat_rejected([](json& d) { d["rope_parameters"]["rope_type"] = "yarn"; },
                         "rope_parameters.rope_type", ErrorKind::Unsupported);
    expect_flat_rejected([](json& d) { d["rope_parameters"].erase("rope_theta"); },
                         "rope_parameters.rope_theta");
    expect_flat_rejected([](json& d) { d["rope_parameters"]["rope_theta"] = -1; },
                         "rope_parameters.rope_theta");
    expect_flat_rejected([](json& d) { d["rope_parameters"]["partial_rotary_factor"] = 1.5; },
                         "rope_parameters.partial_rotary_factor");
    json nested = tiny_nested();
    nested["text_config"]["model_type"] = "qwen3_5_text";
    expect_rejected(nested, "text_config.model_type", ErrorKind::Unsupported);
    nested["text_config"] = "oops";
    expect_rejected(nested, "text_config");
    expect_rejected(json{{"model_type", "qwen4_exp"}}, "text_config");
}

TEST(Qwen4ExpConfigRejects, WrongTypesNameTheField) {
    expect_flat_rejected([](json& d) { d["hidden_size"] = "64"; }, "hidden_size");
    expect_flat_rejected([](json& d) { d["hidden_size"] = 64.5; }, "hidden_size");
    expect_flat_rejected([](json& d) { d["hidden_size"] = nullptr; }, "hidden_size");
    expect_flat_rejected([](json& d) { d["vocab_size"] = 18446744073709551615ULL; }, "vocab_size");
    expect_flat_rejected([](json& d) { d["attention_bias"] = 1; }, "attention_bias");
    expect_flat_rejected([](json& d) { d["rms_norm_eps"] = "small"; }, "rms_norm_eps");
    expect_flat_rejected([](json& d) { d["ple_layer_ids"] = {"two"}; }, "ple_layer_ids[0]");
    expect_flat_rejected([](json& d) { d["rope_parameters"] = 3; }, "rope_parameters");
    expect_flat_rejected([](json& d) { d["num_hidden_layers"] = 1 << 20; }, "num_hidden_layers");
    json nested = tiny_nested();
    nested["text_config"]["hidden_size"] = true;
    expect_rejected(nested, "text_config.hidden_size");
}

TEST(Qwen4ExpConfigRejects, MalformedDocuments) {
    for (std::string_view text : {"", "{", "[1, 2]", "null", "{\"model_type\": }"}) {
        try {
            parse_config(text, "config.json");
            ADD_FAILURE() << "accepted '" << text << "'";
        } catch (const Error& error) {
            EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
            EXPECT_EQ(std::string(error.what()).rfind("config.json: ", 0), 0u) << error.what();
        }
    }
}

TEST(Qwen4ExpConfigRejects, DeeplyNestedJson) {
    const std::string deep =
        "{\"model_type\": \"qwen4_exp_text\", \"x\": " + std::string(200, '[') +
        std::string(200, ']') + "}";
    try {
        parse_config(deep, "config.json");
        ADD_FAILURE() << "accepted 200 nested arrays";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::InvalidInput);
        EXPECT_NE(std::string(error.what()).find("config.json: JSON nests deeper"),
                  std::string::npos)
            << error.what();
    }
}

}  // namespace
}  // namespace cherenkov::model_data::qwen4_exp
