// qwen4_exp tensor-name classification (docs/qwen4_exp.md §2, §6.2; docs/formats.md §3.5–3.9).
#include "model_data/qwen4_exp/tensor_roles.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cherenkov::model_data::qwen4_exp {
namespace {

using R = TensorRole;
using P = NamePrefix;
using C = TensorComponent;

struct Case {
    std::string name;
    TensorRole role;
    NamePrefix prefix;
    TensorComponent component = C::Weight;
    int64_t layer = -1;
    int64_t expert = -1;
    int64_t shard = -1;
    bool mtp = false;
};

void expect_case(const Case& expected) {
    const TensorName got = classify_tensor(expected.name);
    EXPECT_EQ(got.address.role, expected.role)
        << expected.name << " → " << tensor_role_name(got.address.role);
    EXPECT_EQ(got.prefix, expected.prefix) << expected.name;
    EXPECT_EQ(got.component, expected.component) << expected.name;
    EXPECT_EQ(got.address.layer, expected.layer) << expected.name;
    EXPECT_EQ(got.address.expert, expected.expert) << expected.name;
    EXPECT_EQ(got.address.shard, expected.shard) << expected.name;
    EXPECT_EQ(got.address.mtp, expected.mtp) << expected.name;
}

TEST(TensorRoles, ClassifiesHfConditionalGenerationNames) {
    const std::string m = "model.language_model.";
    const std::vector<Case> cases = {
        {m + "embed_tokens.weight", R::EmbedTokens, P::ModelLanguageModel},
        {"lm_head.weight", R::LmHead, P::LmHead},
        {m + "hyper_connection_mixer.hc_norm.weight", R::FinalHcNorm, P::ModelLanguageModel},
        {m + "hyper_connection_mixer.input_mix_weight_down.weight", R::FinalMixDown,
         P::ModelLanguageModel},
        {m + "hyper_connection_mixer.input_mix_weight_up.weight", R::FinalMixUp,
         P::ModelLanguageModel},
        {m + "layers.0.attn_hyper_connection.hc_norm.weight", R::AttnHcNorm, P::ModelLanguageModel,
         C::Weight, 0},
        {m + "layers.7.mlp_hyper_connection.block_inject_weight.weight", R::MlpHcBlockInject,
         P::ModelLanguageModel, C::Weight, 7},
        {m + "layers.12.attn_hyper_connection.input_mix_weight_up.weight", R::AttnHcMixUp,
         P::ModelLanguageModel, C::Weight, 12},
        {m + "layers.0.linear_attn.in_proj_qkv.weight", R::GdnInProjQkv, P::ModelLanguageModel,
         C::Weight, 0},
        {m + "layers.0.linear_attn.conv1d.weight", R::GdnConv1d, P::ModelLanguageModel, C::Weight,
         0},
        {m + "layers.0.linear_attn.dt_bias", R::GdnDtBias, P::ModelLanguageModel, C::Weight, 0},
        {m + "layers.0.linear_attn.A_log", R::GdnALog, P::ModelLanguageModel, C::Weight, 0},
        {m + "layers.0.linear_attn.norm.weight", R::GdnNorm, P::ModelLanguageModel, C::Weight, 0},
        {m + "layers.3.self_attn.q_proj.weight", R::QsaQProj, P::ModelLanguageModel, C::Weight, 3},
        {m + "layers.3.self_attn.o_proj.bias", R::QsaOProj, P::ModelLanguageModel, C::Bias, 3},
        {m + "layers.3.self_attn.k_norm.weight", R::QsaKNorm, P::ModelLanguageModel, C::Weight, 3},
        {m + "layers.3.self_attn.indexer.index_qk_proj.weight", R::IndexerQkProj,
         P::ModelLanguageModel, C::Weight, 3},
        {m + "layers.3.self_attn.indexer.k_layernorm.weight", R::IndexerKNorm,
         P::ModelLanguageModel, C::Weight, 3},
        {m + "layers.5.mlp.gate.weight", R::Router, P::ModelLanguageModel, C::Weight, 5},
        {m + "layers.5.mlp.experts.gate_up_proj", R::ExpertsGateUp, P::ModelLanguageModel,
         C::Weight, 5},
        {m + "layers.5.mlp.experts.down_proj", R::ExpertsDown, P::ModelLanguageModel, C::Weight, 5},
        {m + "layers.5.mlp.experts.511.up_proj.weight", R::ExpertUp, P::ModelLanguageModel,
         C::Weight, 5, 511},
        {m + "layers.5.mlp.shared_expert.down_proj.weight", R::SharedExpertDownProj,
         P::ModelLanguageModel, C::Weight, 5},
        {m + "layers.5.mlp.shared_expert_gate.weight", R::SharedExpertGate, P::ModelLanguageModel,
         C::Weight, 5},
        {m + "layers.1.ple.key_proj.weight", R::PleKeyProj, P::ModelLanguageModel, C::Weight, 1},
        {m + "layers.1.ple.norm_conv.weight", R::PleNormConv, P::ModelLanguageModel, C::Weight, 1},
        {m + "layers.1.ple.conv1d.weight", R::PleConv1d, P::ModelLanguageModel, C::Weight, 1},
        {m + "layers.1.ple.ple_embedding.ngram_embedding.shard_127.weight", R::NgramShard,
         P::ModelLanguageModel, C::Weight, 1, -1, 127},
        {m + "layers.1.ple.ple_embedding.layer_multipliers", R::PleLayerMultipliers,
         P::ModelLanguageModel, C::Weight, 1},
        {m + "layers.1.ple.ple_embedding.ngram_heads_vocab_sizes", R::PleHeadVocabSizes,
         P::ModelLanguageModel, C::Weight, 1},
        {m + "layers.1.ple.ple_embedding.ngram_heads_offsets", R::PleHeadOffsets,
         P::ModelLanguageModel, C::Weight, 1},
        {m + "layers.1.ple.ple_embedding.ngram_embedding.weight_scale", R::PleWeightScale,
         P::ModelLanguageModel, C::Weight, 1},
    };
    for (const Case& item : cases) expect_case(item);
}

TEST(TensorRoles, ClassifiesCausalLmAndMtpNames) {
    const std::vector<Case> cases = {
        {"model.embed_tokens.weight", R::EmbedTokens, P::Model},
        {"model.layers.2.self_attn.v_proj.weight", R::QsaVProj, P::Model, C::Weight, 2},
        {"mtp.pre_fc_norm_embedding.weight", R::MtpPreFcNormEmbedding, P::Mtp, C::Weight, -1, -1,
         -1, true},
        {"mtp.pre_fc_norm_hidden.weight", R::MtpPreFcNormHidden, P::Mtp, C::Weight, -1, -1, -1,
         true},
        {"mtp.fc_embedding.weight", R::MtpFcEmbedding, P::Mtp, C::Weight, -1, -1, -1, true},
        {"mtp.fc_hidden.weight", R::MtpFcHidden, P::Mtp, C::Weight, -1, -1, -1, true},
        {"mtp.hyper_connection_mixer.hc_norm.weight", R::MtpHcNorm, P::Mtp, C::Weight, -1, -1, -1,
         true},
        {"mtp.embed_tokens.weight", R::MtpEmbedTokens, P::Mtp, C::Weight, -1, -1, -1, true},
        {"mtp.shared_head.head.weight", R::MtpLmHead, P::Mtp, C::Weight, -1, -1, -1, true},
        {"mtp.layers.0.self_attn.q_proj.weight", R::QsaQProj, P::Mtp, C::Weight, 0, -1, -1, true},
        {"mtp.layers.0.mlp.experts.gate_up_proj", R::ExpertsGateUp, P::Mtp, C::Weight, 0, -1, -1,
         true},
        {"model.mtp.fc_hidden.weight", R::MtpFcHidden, P::ModelMtp, C::Weight, -1, -1, -1, true},
        {"model.mtp.layers.1.mlp.experts.3.gate_proj.weight", R::ExpertGate, P::ModelMtp, C::Weight,
         1, 3, -1, true},
        {"language_model.mtp.fc_embedding.weight", R::MtpFcEmbedding, P::LanguageModelMtp,
         C::Weight, -1, -1, -1, true},
    };
    for (const Case& item : cases) expect_case(item);
}

TEST(TensorRoles, ClassifiesMlxConvertedNames) {
    const std::string m = "language_model.model.";
    const std::vector<Case> cases = {
        {m + "embed_tokens.weight", R::EmbedTokens, P::LanguageModelModel},
        {m + "embed_tokens.scales", R::EmbedTokens, P::LanguageModelModel, C::Scales},
        {m + "embed_tokens.biases", R::EmbedTokens, P::LanguageModelModel, C::Biases},
        {"language_model.lm_head.weight", R::LmHead, P::LanguageModelLmHead},
        {"language_model.lm_head.scales", R::LmHead, P::LanguageModelLmHead, C::Scales},
        {m + "layers.3.mlp.switch_mlp.gate_proj.weight", R::SwitchGate, P::LanguageModelModel,
         C::Weight, 3},
        {m + "layers.3.mlp.switch_mlp.down_proj.biases", R::SwitchDown, P::LanguageModelModel,
         C::Biases, 3},
        {m + "layers.3.mlp.gate.scales", R::Router, P::LanguageModelModel, C::Scales, 3},
        {m + "layers.0.linear_attn.in_proj_qkv.scales", R::GdnInProjQkv, P::LanguageModelModel,
         C::Scales, 0},
        {m + "layers.1.ple.ple_embedding.ngram_embedding.weight", R::NgramTable,
         P::LanguageModelModel, C::Weight, 1},
        {"model.layers.3.mlp.switch_mlp.up_proj.weight", R::SwitchUp, P::Model, C::Weight, 3},
        {"model.layers.1.ple.ple_embedding.ngram_embedding.shard_0.scales", R::NgramShard, P::Model,
         C::Scales, 1, -1, 0},
    };
    for (const Case& item : cases) expect_case(item);
}

TEST(TensorRoles, IgnoresKnownUnusedNames) {
    for (const char* name :
         {"model.visual.blocks.0.attn.qkv.weight", "model.language_model.rotary_emb.inv_freq",
          "model.layers.3.self_attn.rotary_emb.inv_freq",
          "model.language_model.layers.1.ple.ple_embedding.hashstats_counts",
          "model.language_model.layers.1.ple.ple_embedding.token_lookup",
          "model.language_model.hyper_connection_mixer.block_inject_weight.weight",
          "mtp.hyper_connection_mixer.block_inject_weight.weight", "vision_tower.patch.weight"}) {
        const TensorName got = classify_tensor(name);
        EXPECT_EQ(got.address.role, R::Ignored) << name;
        EXPECT_FALSE(got.note.empty()) << name;
    }
}

TEST(TensorRoles, LeavesUnrecognizedNamesUnknown) {
    for (const char* name :
         {"",
          "foo.bar",
          "model.norm.weight",
          "mtp.norm.weight",
          "mtp.fc.weight",
          "model.layers.0.mlp.experts.gate_up_proj.weight",  // fused takes no suffix
          "model.layers.0.linear_attn.dt_bias.weight",
          "model.layers.x.mlp.gate.weight",
          "model.layers.01.mlp.gate.weight",
          "model.layers.-1.mlp.gate.weight",
          "model.layers.99999999999.mlp.gate.weight",
          "model.layers.0.linear_attn.norm.scales",
          "model.layers.0.mlp.gate.bias",
          "model.embed_tokens",
          "lm_head",
          "model.layers.0.mlp.experts.1x.up_proj.weight",
          "model.layers.1.ple.ple_embedding.ngram_embedding.shard_.weight",
          "model.layers.0.self_attn.q_proj.weight.extra",
          "model.layers.0",
          "model.layers.0.",
          "model.layers..mlp.gate.weight",
          "model.linear_attn.A_log"}) {
        const TensorName got = classify_tensor(name);
        EXPECT_EQ(got.address.role, R::Unknown) << name;
        EXPECT_EQ(got.address.layer, -1) << name;
    }
}

TEST(TensorRoles, NamesRoundTripThroughEveryPrefixForm) {
    const std::vector<TensorAddress> trunk = {
        {R::EmbedTokens, false, -1, -1, -1},   {R::LmHead, false, -1, -1, -1},
        {R::FinalMixUp, false, -1, -1, -1},    {R::AttnHcBlockInject, false, 4, -1, -1},
        {R::GdnALog, false, 0, -1, -1},        {R::GdnConv1d, false, 2, -1, -1},
        {R::IndexerQNorm, false, 3, -1, -1},   {R::ExpertsGateUp, false, 9, -1, -1},
        {R::ExpertDown, false, 9, 17, -1},     {R::SwitchUp, false, 9, -1, -1},
        {R::NgramShard, false, 1, -1, 12},     {R::NgramTable, false, 1, -1, -1},
        {R::PleHeadOffsets, false, 1, -1, -1}, {R::PleWeightScale, false, 1, -1, -1},
    };
    for (NamePrefix prefix : {P::ModelLanguageModel, P::Model, P::LanguageModelModel}) {
        for (const TensorAddress& address : trunk) {
            const std::string name = tensor_name_of(address, prefix);
            const TensorName got = classify_tensor(name);
            EXPECT_EQ(got.address, address) << name;
        }
    }
    EXPECT_EQ(tensor_name_of({R::LmHead, false, -1, -1, -1}, P::LanguageModelModel),
              "language_model.lm_head.weight");
    EXPECT_EQ(tensor_name_of({R::ExpertGate, false, 2, 5, -1}, P::ModelLanguageModel),
              "model.language_model.layers.2.mlp.experts.5.gate_proj.weight");
    EXPECT_EQ(tensor_name_of({R::NgramShard, false, 1, -1, 3}, P::Model),
              "model.layers.1.ple.ple_embedding.ngram_embedding.shard_3.weight");
    const std::vector<TensorAddress> mtp = {
        {R::MtpPreFcNormHidden, true, -1, -1, -1},
        {R::MtpLmHead, true, -1, -1, -1},
        {R::QsaKProj, true, 0, -1, -1},
        {R::ExpertUp, true, 0, 3, -1},
    };
    for (NamePrefix prefix : {P::Mtp, P::ModelMtp, P::LanguageModelMtp}) {
        for (const TensorAddress& address : mtp) {
            const std::string name = tensor_name_of(address, prefix);
            EXPECT_EQ(classify_tensor(name).address, address) << name;
            EXPECT_EQ(classify_tensor(name).prefix, prefix) << name;
        }
    }
}

TEST(TensorRoles, ModuleIsTheNameWithoutItsComponent) {
    EXPECT_EQ(classify_tensor("language_model.model.layers.3.mlp.gate.scales").module,
              "language_model.model.layers.3.mlp.gate");
    EXPECT_EQ(classify_tensor("model.layers.0.linear_attn.A_log").module,
              "model.layers.0.linear_attn.A_log");
    EXPECT_EQ(tensor_role_name(R::AttnHcNorm), "attn_hc_norm");
    EXPECT_EQ(tensor_component_name(C::Biases), "biases");
    EXPECT_TRUE(is_layer_role(R::NgramShard));
    EXPECT_FALSE(is_layer_role(R::MtpFcHidden));
    EXPECT_TRUE(is_quantizable_role(R::SwitchDown));
    EXPECT_FALSE(is_quantizable_role(R::GdnConv1d));
}

}  // namespace
}  // namespace cherenkov::model_data::qwen4_exp
