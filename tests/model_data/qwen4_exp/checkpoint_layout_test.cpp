// describe_layout on synthesized tensor lists for the tiny config of docs/qwen4_exp.md §7: both
// prefix forms, fused and per-expert experts, MTP, MLX conversions, and broken variants.
#include "model_data/qwen4_exp/checkpoint_layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "base/error.h"
#include "model_data/qwen4_exp/tiny_config.h"

namespace cherenkov::model_data::qwen4_exp {
namespace {

using nlohmann::json;

Config tiny_config() {
    return parse_config(testing::tiny_flat(), "config.json");
}

enum class Experts { Fused, PerExpert, Stacked };

struct Synth {
    std::string trunk = "model.language_model.";
    std::string head = "lm_head.weight";
    std::string mtp = "mtp.";
    Experts experts = Experts::Fused;
    bool with_mtp = true;
    bool mlx_conv = false;                              // conv1d [C, K, 1]
    std::vector<int64_t> shard_rows = {142, 142, 140};  // torch.chunk(424 rows, 3)
};

// Tiny sizes (§7): H=64 C=4 R=16 V=256 E=8 I=Is=32 nH=4 nKV=2 D=32 Hk=2 Hv=4 dk=dv=16 Kc=4
// nI=2 dI=16 P=64 Kp=4 N=3 NH=4 dh=16; conv_dim = 2·32 + 64 = 128; C·H = 256.
std::vector<TensorEntry> tiny_tensors(const Synth& s) {
    std::vector<TensorEntry> t;
    auto add = [&](const std::string& name, std::vector<int64_t> shape,
                   const std::string& dtype = "BF16") {
        t.push_back({name, dtype, std::move(shape)});
    };
    auto conv = [&](int64_t channels) {
        return s.mlx_conv ? std::vector<int64_t>{channels, 4, 1}
                          : std::vector<int64_t>{channels, 1, 4};
    };
    auto hyper = [&](const std::string& p) {
        for (const char* kind : {"attn_hyper_connection.", "mlp_hyper_connection."}) {
            add(p + kind + "hc_norm.weight", {256});
            add(p + kind + "input_mix_weight_down.weight", {16, 256});
            add(p + kind + "input_mix_weight_up.weight", {256, 16});
            add(p + kind + "block_inject_weight.weight", {4, 256});
        }
    };
    auto qsa = [&](const std::string& p) {
        add(p + "self_attn.q_proj.weight", {256, 64});
        add(p + "self_attn.k_proj.weight", {64, 64});
        add(p + "self_attn.v_proj.weight", {64, 64});
        add(p + "self_attn.o_proj.weight", {64, 128});
        add(p + "self_attn.q_norm.weight", {32});
        add(p + "self_attn.k_norm.weight", {32});
        add(p + "self_attn.indexer.index_qk_proj.weight", {48, 64});
        add(p + "self_attn.indexer.q_layernorm.weight", {16});
        add(p + "self_attn.indexer.k_layernorm.weight", {16});
    };
    auto gdn = [&](const std::string& p) {
        add(p + "linear_attn.in_proj_qkv.weight", {128, 64});
        add(p + "linear_attn.in_proj_z.weight", {64, 64});
        add(p + "linear_attn.in_proj_b.weight", {4, 64});
        add(p + "linear_attn.in_proj_a.weight", {4, 64});
        add(p + "linear_attn.conv1d.weight", conv(128));
        add(p + "linear_attn.dt_bias", {4});
        add(p + "linear_attn.A_log", {4}, "F32");
        add(p + "linear_attn.norm.weight", {16});
        add(p + "linear_attn.out_proj.weight", {64, 64});
    };
    auto moe = [&](const std::string& p) {
        add(p + "mlp.gate.weight", {8, 64});
        switch (s.experts) {
            case Experts::Fused:
                add(p + "mlp.experts.gate_up_proj", {8, 64, 64});
                add(p + "mlp.experts.down_proj", {8, 64, 32});
                break;
            case Experts::PerExpert:
                for (int expert = 0; expert < 8; ++expert) {
                    const std::string e = p + "mlp.experts." + std::to_string(expert) + ".";
                    add(e + "gate_proj.weight", {32, 64});
                    add(e + "up_proj.weight", {32, 64});
                    add(e + "down_proj.weight", {64, 32});
                }
                break;
            case Experts::Stacked:
                add(p + "mlp.switch_mlp.gate_proj.weight", {8, 32, 64});
                add(p + "mlp.switch_mlp.up_proj.weight", {8, 32, 64});
                add(p + "mlp.switch_mlp.down_proj.weight", {8, 64, 32});
                break;
        }
        add(p + "mlp.shared_expert.gate_proj.weight", {32, 64});
        add(p + "mlp.shared_expert.up_proj.weight", {32, 64});
        add(p + "mlp.shared_expert.down_proj.weight", {64, 32});
        add(p + "mlp.shared_expert_gate.weight", {1, 64});
    };
    auto mixer = [&](const std::string& p) {
        add(p + "hyper_connection_mixer.hc_norm.weight", {256});
        add(p + "hyper_connection_mixer.input_mix_weight_down.weight", {16, 256});
        add(p + "hyper_connection_mixer.input_mix_weight_up.weight", {256, 16});
    };

    add(s.trunk + "embed_tokens.weight", {256, 64});
    add(s.head, {256, 64});
    mixer(s.trunk);
    for (int layer = 0; layer < 4; ++layer) {
        const std::string p = s.trunk + "layers." + std::to_string(layer) + ".";
        hyper(p);
        if (layer < 2) {
            gdn(p);
        } else {
            qsa(p);
        }
        moe(p);
    }
    const std::string ple = s.trunk + "layers.1.ple.";
    add(ple + "key_proj.weight", {256, 64});
    add(ple + "value_proj.weight", {64, 64});
    add(ple + "norm_key.weight", {256});
    add(ple + "norm_query.weight", {256});
    add(ple + "norm_conv.weight", {256});
    add(ple + "conv1d.weight", conv(256));
    for (size_t shard = 0; shard < s.shard_rows.size(); ++shard) {
        add(ple + "ple_embedding.ngram_embedding.shard_" + std::to_string(shard) + ".weight",
            {s.shard_rows[shard], 16});
    }
    add(ple + "ple_embedding.layer_multipliers", {3}, "I64");
    add(ple + "ple_embedding.ngram_heads_vocab_sizes", {4}, "I64");
    add(ple + "ple_embedding.ngram_heads_offsets", {4}, "I64");
    if (s.with_mtp) {
        add(s.mtp + "pre_fc_norm_embedding.weight", {64});
        add(s.mtp + "pre_fc_norm_hidden.weight", {256});
        add(s.mtp + "fc_embedding.weight", {64, 64});
        add(s.mtp + "fc_hidden.weight", {64, 64});
        mixer(s.mtp);
        hyper(s.mtp + "layers.0.");
        qsa(s.mtp + "layers.0.");
        moe(s.mtp + "layers.0.");
    }
    // Known and unused (§2.1).
    add("model.visual.blocks.0.attn.qkv.weight", {16, 16});
    add(s.trunk + "hyper_connection_mixer.block_inject_weight.weight", {4, 256});
    return t;
}

TensorEntry* find(std::vector<TensorEntry>& tensors, const std::string& name) {
    for (TensorEntry& entry : tensors) {
        if (entry.name == name) return &entry;
    }
    ADD_FAILURE() << "no tensor " << name;
    return nullptr;
}

void remove_tensor(std::vector<TensorEntry>& tensors, const std::string& name) {
    const auto before = tensors.size();
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                 [&](const TensorEntry& entry) { return entry.name == name; }),
                  tensors.end());
    EXPECT_EQ(tensors.size() + 1, before) << name;
}

bool contains(const std::vector<std::string>& list, const std::string& item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

// The first problem of a kind about a tensor, or nullptr.
const LayoutProblem* problem_about(const CheckpointLayout& layout, ProblemKind kind,
                                   const std::string& tensor) {
    for (const LayoutProblem& problem : layout.problems) {
        if (problem.kind == kind && problem.tensor == tensor) return &problem;
    }
    return nullptr;
}

std::string problems_text(const CheckpointLayout& layout) {
    std::string text;
    for (const LayoutProblem& problem : layout.problems) {
        text += std::string(problem_kind_name(problem.kind)) + " " + problem.tensor + ": " +
                problem.message + "\n";
    }
    for (const std::string& name : layout.missing) text += "missing " + name + "\n";
    return text;
}

TEST(CheckpointLayout, HfFusedCheckpointWithMtpIsComplete) {
    const CheckpointLayout layout = describe_layout(tiny_config(), tiny_tensors({}));
    ASSERT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_EQ(layout.trunk_prefix, NamePrefix::ModelLanguageModel);
    EXPECT_EQ(layout.head_prefix, NamePrefix::LmHead);
    EXPECT_EQ(layout.expert_form, ExpertForm::Fused);
    EXPECT_EQ(layout.conv_layout, ConvLayout::Hf);
    EXPECT_EQ(layout.norm_convention, NormConvention::ZeroCentred);
    EXPECT_FALSE(layout.quantized);
    EXPECT_TRUE(layout.unknown.empty());
    EXPECT_EQ(layout.ignored.size(), 2u);
    EXPECT_TRUE(layout.mtp.present);
    EXPECT_EQ(layout.mtp.prefix, NamePrefix::Mtp);
    EXPECT_EQ(layout.mtp.layers, std::vector<int64_t>{0});
    EXPECT_EQ(layout.mtp.expert_form, ExpertForm::Fused);
    EXPECT_FALSE(layout.mtp.dedicated_embeddings);

    ASSERT_EQ(layout.ple_layers.size(), 1u);
    const PleLayerLayout& ple = layout.ple_layers[0];
    EXPECT_EQ(ple.layer, 1);
    EXPECT_EQ(ple.ple_layer_index, 0);
    EXPECT_FALSE(ple.concatenated);
    EXPECT_EQ(ple.expected_rows, 424);
    EXPECT_EQ(ple.rows, 424);
    ASSERT_EQ(ple.shards.size(), 3u);
    EXPECT_EQ(ple.shards[1].row_offset, 142);
    EXPECT_EQ(ple.shards[2].row_offset, 284);
    EXPECT_EQ(ple.shards[2].rows, 140);
    EXPECT_TRUE(ple.has_layer_multipliers && ple.has_head_vocab_sizes && ple.has_head_offsets);
    EXPECT_FALSE(ple.has_weight_scale);

    const json out = layout_to_json(layout);
    EXPECT_TRUE(out["ok"].get<bool>());
    EXPECT_EQ(out["trunk_prefix"], "model.language_model.");
    EXPECT_EQ(out["expert_form"], "fused");
    EXPECT_EQ(out["norm_convention"], "zero_centred");
    EXPECT_EQ(out["ple_layers"][0]["shards"][2]["row_offset"], 284);
    EXPECT_EQ(out["mtp"]["layers"], json::array({0}));
    EXPECT_EQ(out["role_counts"]["ngram_shard"], 3);
    EXPECT_NO_THROW(require_loadable(layout, "tiny"));
}

TEST(CheckpointLayout, CausalLmPrefixWithPerExpertWeightsAndModelMtp) {
    Synth synth;
    synth.trunk = "model.";
    synth.mtp = "model.mtp.";
    synth.experts = Experts::PerExpert;
    const CheckpointLayout layout = describe_layout(tiny_config(), tiny_tensors(synth));
    ASSERT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_EQ(layout.trunk_prefix, NamePrefix::Model);
    EXPECT_EQ(layout.expert_form, ExpertForm::PerExpert);
    EXPECT_EQ(layout.mtp.prefix, NamePrefix::ModelMtp);
    EXPECT_EQ(layout.mtp.expert_form, ExpertForm::PerExpert);
    EXPECT_EQ(layout.norm_convention, NormConvention::ZeroCentred);
}

TEST(CheckpointLayout, ShardsAreOrderedNumerically) {
    Synth synth;
    synth.shard_rows = std::vector<int64_t>(11, 39);
    synth.shard_rows.back() = 34;  // 10 · 39 + 34 = 424
    std::vector<TensorEntry> tensors = tiny_tensors(synth);
    std::reverse(tensors.begin(), tensors.end());
    const CheckpointLayout layout = describe_layout(tiny_config(), tensors);
    ASSERT_TRUE(layout.ok()) << problems_text(layout);
    const PleLayerLayout& ple = layout.ple_layers.at(0);
    ASSERT_EQ(ple.shards.size(), 11u);
    for (int64_t shard = 0; shard < 11; ++shard) {
        EXPECT_EQ(ple.shards[static_cast<size_t>(shard)].shard, shard);
        EXPECT_EQ(ple.shards[static_cast<size_t>(shard)].row_offset, 39 * shard);
    }
    // 11 shards where split_ngram_parts says 3: noted, not fatal.
    EXPECT_FALSE(layout.notes.empty());
}

TEST(CheckpointLayout, ReportsMissingTensors) {
    std::vector<TensorEntry> tensors = tiny_tensors({});
    const std::string q_norm = "model.language_model.layers.2.self_attn.q_norm.weight";
    remove_tensor(tensors, q_norm);
    remove_tensor(tensors, "lm_head.weight");
    remove_tensor(tensors, "mtp.fc_hidden.weight");
    remove_tensor(tensors, "model.language_model.layers.1.ple.norm_conv.weight");
    const CheckpointLayout layout = describe_layout(tiny_config(), tensors);
    EXPECT_FALSE(layout.ok());
    EXPECT_TRUE(layout.problems.empty()) << problems_text(layout);
    EXPECT_EQ(layout.missing.size(), 4u);
    EXPECT_TRUE(contains(layout.missing, q_norm));
    EXPECT_TRUE(contains(layout.missing, "lm_head.weight"));
    EXPECT_TRUE(contains(layout.missing, "mtp.fc_hidden.weight"));
    EXPECT_TRUE(contains(layout.missing, "model.language_model.layers.1.ple.norm_conv.weight"));
    try {
        require_loadable(layout, "tiny-checkpoint");
        ADD_FAILURE() << "require_loadable accepted missing tensors";
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(error.what()).find("tiny-checkpoint"), std::string::npos);
        EXPECT_NE(std::string(error.what()).find(q_norm), std::string::npos);
    }
}

TEST(CheckpointLayout, ReportsAMissingExpertAndMissingExperts) {
    Synth synth;
    synth.experts = Experts::PerExpert;
    std::vector<TensorEntry> tensors = tiny_tensors(synth);
    remove_tensor(tensors, "model.language_model.layers.0.mlp.experts.5.up_proj.weight");
    CheckpointLayout layout = describe_layout(tiny_config(), tensors);
    EXPECT_EQ(layout.missing, std::vector<std::string>{
                                  "model.language_model.layers.0.mlp.experts.5.up_proj.weight"});

    tensors = tiny_tensors({});
    remove_tensor(tensors, "model.language_model.layers.3.mlp.experts.gate_up_proj");
    remove_tensor(tensors, "model.language_model.layers.3.mlp.experts.down_proj");
    layout = describe_layout(tiny_config(), tensors);
    EXPECT_EQ(layout.missing,
              (std::vector<std::string>{"model.language_model.layers.3.mlp.experts.gate_up_proj",
                                        "model.language_model.layers.3.mlp.experts.down_proj"}));
}

TEST(CheckpointLayout, ReportsWrongShapes) {
    std::vector<TensorEntry> tensors = tiny_tensors({});
    const std::string z = "model.language_model.layers.0.linear_attn.in_proj_z.weight";
    const std::string fused = "model.language_model.layers.2.mlp.experts.gate_up_proj";
    const std::string conv = "model.language_model.layers.1.linear_attn.conv1d.weight";
    find(tensors, z)->shape = {63, 64};
    find(tensors, fused)->shape = {8, 32, 64};  // I rows instead of 2I
    find(tensors, conv)->shape = {128, 4};
    const CheckpointLayout layout = describe_layout(tiny_config(), tensors);
    EXPECT_FALSE(layout.ok());
    const LayoutProblem* problem = problem_about(layout, ProblemKind::Shape, z);
    ASSERT_NE(problem, nullptr) << problems_text(layout);
    EXPECT_EQ(problem->message, "shape [63, 64], expected [64, 64]");
    EXPECT_NE(problem_about(layout, ProblemKind::Shape, fused), nullptr);
    EXPECT_NE(problem_about(layout, ProblemKind::Shape, conv), nullptr);
    EXPECT_EQ(layout.problems.size(), 3u) << problems_text(layout);
    const auto it =
        std::find_if(layout.tensors.begin(), layout.tensors.end(),
                     [&](const LayoutTensor& tensor) { return tensor.entry.name == z; });
    ASSERT_NE(it, layout.tensors.end());
    EXPECT_EQ(it->shape_check, ShapeCheck::Mismatch);
}

TEST(CheckpointLayout, ReportsBadShardRowsAndGaps) {
    Synth synth;
    synth.shard_rows = {142, 142, 139};
    CheckpointLayout layout = describe_layout(tiny_config(), tiny_tensors(synth));
    ASSERT_EQ(layout.problems.size(), 1u) << problems_text(layout);
    EXPECT_EQ(layout.problems[0].kind, ProblemKind::Shards);
    EXPECT_NE(layout.problems[0].message.find("has 423 rows, expected padded_rows 424"),
              std::string::npos);

    std::vector<TensorEntry> tensors = tiny_tensors({});
    const std::string shard2 =
        "model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_2.weight";
    remove_tensor(tensors,
                  "model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_1.weight");
    layout = describe_layout(tiny_config(), tensors);
    const LayoutProblem* gap = problem_about(layout, ProblemKind::Shards, shard2);
    ASSERT_NE(gap, nullptr) << problems_text(layout);
    EXPECT_EQ(gap->message, "shard 1 is missing (shards are numbered 0..n-1)");

    tensors = tiny_tensors({});
    find(tensors, shard2)->shape = {140, 15};  // width must be dh = 16
    layout = describe_layout(tiny_config(), tensors);
    EXPECT_NE(problem_about(layout, ProblemKind::Shape, shard2), nullptr) << problems_text(layout);

    tensors = tiny_tensors({});
    for (const char* shard : {"shard_0", "shard_1", "shard_2"}) {
        remove_tensor(
            tensors,
            std::string("model.language_model.layers.1.ple.ple_embedding.ngram_embedding.") +
                shard + ".weight");
    }
    layout = describe_layout(tiny_config(), tensors);
    EXPECT_EQ(
        layout.missing,
        std::vector<std::string>{
            "model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_0.weight"});
}

TEST(CheckpointLayout, ReportsUnknownAndUnexpectedTensors) {
    std::vector<TensorEntry> tensors = tiny_tensors({});
    tensors.push_back({"model.language_model.layers.0.mystery.weight", "BF16", {4}});
    const std::string gdn_on_qsa = "model.language_model.layers.2.linear_attn.A_log";
    const std::string beyond = "model.language_model.layers.4.mlp.gate.weight";
    const std::string expert = "model.language_model.layers.0.mlp.experts.8.up_proj.weight";
    const std::string ple_elsewhere = "model.language_model.layers.0.ple.norm_key.weight";
    const std::string bias = "model.language_model.layers.2.self_attn.q_proj.bias";
    tensors.push_back({gdn_on_qsa, "F32", {4}});
    tensors.push_back({beyond, "BF16", {8, 64}});
    tensors.push_back({expert, "BF16", {32, 64}});
    tensors.push_back({ple_elsewhere, "BF16", {256}});
    tensors.push_back({bias, "BF16", {256}});
    const CheckpointLayout layout = describe_layout(tiny_config(), tensors);
    EXPECT_EQ(layout.unknown,
              std::vector<std::string>{"model.language_model.layers.0.mystery.weight"});
    for (const std::string& name : {gdn_on_qsa, beyond, expert, ple_elsewhere, bias}) {
        EXPECT_NE(problem_about(layout, ProblemKind::Unexpected, name), nullptr) << name;
    }
    // Mixed fused and per-expert tensors in layer 0.
    EXPECT_EQ(layout.expert_form, ExpertForm::Mixed);
}

TEST(CheckpointLayout, AttentionBiasesAreRequiredWhenConfigured) {
    json document = testing::tiny_flat();
    document["attention_bias"] = true;
    const Config config = parse_config(document, "config.json");
    std::vector<TensorEntry> tensors = tiny_tensors({});
    CheckpointLayout layout = describe_layout(config, tensors);
    EXPECT_TRUE(contains(layout.missing, "model.language_model.layers.2.self_attn.q_proj.bias"));
    EXPECT_TRUE(contains(layout.missing, "mtp.layers.0.self_attn.o_proj.bias"));
    for (const std::string& p :
         {std::string("model.language_model.layers.2."),
          std::string("model.language_model.layers.3."), std::string("mtp.layers.0.")}) {
        tensors.push_back({p + "self_attn.q_proj.bias", "BF16", {256}});
        tensors.push_back({p + "self_attn.k_proj.bias", "BF16", {64}});
        tensors.push_back({p + "self_attn.v_proj.bias", "BF16", {64}});
        tensors.push_back({p + "self_attn.o_proj.bias", "BF16", {64}});
    }
    layout = describe_layout(config, tensors);
    EXPECT_TRUE(layout.ok()) << problems_text(layout);
}

TEST(CheckpointLayout, MtpAbsentOrUndeclared) {
    Synth synth;
    synth.with_mtp = false;
    CheckpointLayout layout = describe_layout(tiny_config(), tiny_tensors(synth));
    EXPECT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_FALSE(layout.mtp.present);
    EXPECT_EQ(layout.mtp.declared_layers, 1);
    ASSERT_EQ(layout.notes.size(), 1u);
    EXPECT_NE(layout.notes[0].find("MTP disabled"), std::string::npos);

    json document = testing::tiny_flat();
    document["mtp_num_hidden_layers"] = 0;
    layout = describe_layout(parse_config(document, "config.json"), tiny_tensors({}));
    EXPECT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_TRUE(layout.mtp.present);
    ASSERT_EQ(layout.notes.size(), 1u);
    EXPECT_NE(layout.notes[0].find("MTP unused"), std::string::npos);
}

TEST(CheckpointLayout, DedicatedMtpEmbeddings) {
    json document = testing::tiny_flat();
    document["mtp_use_dedicated_embeddings"] = true;
    const Config config = parse_config(document, "config.json");
    std::vector<TensorEntry> tensors = tiny_tensors({});
    CheckpointLayout layout = describe_layout(config, tensors);
    EXPECT_EQ(layout.missing,
              (std::vector<std::string>{"mtp.embed_tokens.weight", "mtp.shared_head.head.weight"}));
    tensors.push_back({"mtp.embed_tokens.weight", "BF16", {256, 64}});
    tensors.push_back({"mtp.shared_head.head.weight", "BF16", {256, 64}});
    layout = describe_layout(config, tensors);
    EXPECT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_TRUE(layout.mtp.dedicated_embeddings);
}

TEST(CheckpointLayout, TiedHeadNeedsNoLmHead) {
    json document = testing::tiny_flat();
    document["tie_word_embeddings"] = true;
    std::vector<TensorEntry> tensors = tiny_tensors({});
    remove_tensor(tensors, "lm_head.weight");
    const CheckpointLayout layout = describe_layout(parse_config(document, "config.json"), tensors);
    EXPECT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_TRUE(layout.lm_head_tied);
    EXPECT_EQ(layout.head_prefix, NamePrefix::None);
}

TEST(CheckpointLayout, ReportsDtypeAndConsistencyProblems) {
    std::vector<TensorEntry> tensors = tiny_tensors({});
    const std::string sizes =
        "model.language_model.layers.1.ple.ple_embedding.ngram_heads_vocab_sizes";
    const std::string router = "model.language_model.layers.0.mlp.gate.weight";
    find(tensors, sizes)->dtype = "F32";
    find(tensors, router)->dtype = "I8";
    // The same tensor under a second prefix form.
    tensors.push_back({"model.layers.0.mlp.shared_expert_gate.weight", "BF16", {1, 64}});
    const CheckpointLayout layout = describe_layout(tiny_config(), tensors);
    EXPECT_NE(problem_about(layout, ProblemKind::Dtype, sizes), nullptr) << problems_text(layout);
    EXPECT_NE(problem_about(layout, ProblemKind::Dtype, router), nullptr);
    EXPECT_NE(problem_about(layout, ProblemKind::Inconsistent,
                            "model.layers.0.mlp.shared_expert_gate.weight"),
              nullptr);
    EXPECT_NE(problem_about(layout, ProblemKind::Inconsistent, ""), nullptr);  // mixed prefixes
}

// An mlx-lm style conversion: language_model.model. prefix, switch_mlp experts, conv1d
// [C, K, 1], MTP dropped, every Linear / Embedding packed 4-bit with group size 32.
std::vector<TensorEntry> mlx_tensors(int bits) {
    Synth synth;
    synth.trunk = "language_model.model.";
    synth.head = "language_model.lm_head.weight";
    synth.experts = Experts::Stacked;
    synth.with_mtp = false;
    synth.mlx_conv = true;
    std::vector<TensorEntry> packed;
    for (const TensorEntry& entry : tiny_tensors(synth)) {
        // mlx-lm quantizes Linear / Embedding weights whose input width is a multiple of the
        // group size; conv1d, norms and buffers stay float (docs/formats.md §3.3).
        const bool suffixed =
            entry.name.size() > 7 && entry.name.compare(entry.name.size() - 7, 7, ".weight") == 0;
        const bool quantize = suffixed && entry.shape.size() >= 2 && entry.shape.back() % 32 == 0 &&
                              entry.name.find("conv1d") == std::string::npos &&
                              entry.name.find("visual") == std::string::npos &&
                              entry.name.find("mixer.block_inject") == std::string::npos;
        if (!quantize) {
            packed.push_back(entry);
            continue;
        }
        const std::string module = entry.name.substr(0, entry.name.size() - 7);
        std::vector<int64_t> weight = entry.shape;
        std::vector<int64_t> groups = entry.shape;
        weight.back() = entry.shape.back() * bits / 32;
        groups.back() = entry.shape.back() / 32;
        packed.push_back({entry.name, "U32", weight});
        packed.push_back({module + ".scales", "BF16", groups});
        packed.push_back({module + ".biases", "BF16", groups});
    }
    return packed;
}

TEST(CheckpointLayout, MlxQuantizedConversionWithKnownBits) {
    LayoutOptions options;
    options.bits_of = [](std::string_view) -> std::optional<int> { return 4; };
    const CheckpointLayout layout = describe_layout(tiny_config(), mlx_tensors(4), options);
    ASSERT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_TRUE(layout.quantized);
    EXPECT_TRUE(layout.unchecked.empty());
    EXPECT_EQ(layout.trunk_prefix, NamePrefix::LanguageModelModel);
    EXPECT_EQ(layout.head_prefix, NamePrefix::LanguageModelLmHead);
    EXPECT_EQ(layout.expert_form, ExpertForm::MlxStacked);
    EXPECT_EQ(layout.conv_layout, ConvLayout::Mlx);
    EXPECT_EQ(layout.norm_convention, NormConvention::Undetermined);
    EXPECT_EQ(layout.ple_layers.at(0).rows, 424);

    // Wrong bits: every packed width disagrees.
    options.bits_of = [](std::string_view) -> std::optional<int> { return 8; };
    const CheckpointLayout wrong = describe_layout(tiny_config(), mlx_tensors(4), options);
    EXPECT_NE(problem_about(wrong, ProblemKind::Shape, "language_model.model.embed_tokens.weight"),
              nullptr)
        << problems_text(wrong);
}

TEST(CheckpointLayout, MlxPackedWidthsUncheckedWithoutBits) {
    const CheckpointLayout layout = describe_layout(tiny_config(), mlx_tensors(4));
    ASSERT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_FALSE(layout.unchecked.empty());
    EXPECT_TRUE(
        contains(layout.unchecked, "language_model.model.layers.0.mlp.switch_mlp.up_proj.weight"));
    const auto it = std::find_if(
        layout.tensors.begin(), layout.tensors.end(),
        [](const LayoutTensor& t) { return t.entry.name == "language_model.lm_head.weight"; });
    ASSERT_NE(it, layout.tensors.end());
    EXPECT_EQ(it->shape_check, ShapeCheck::Unchecked);
}

TEST(CheckpointLayout, MlxCompanionProblems) {
    std::vector<TensorEntry> tensors = mlx_tensors(4);
    remove_tensor(tensors, "language_model.model.layers.0.mlp.gate.scales");
    tensors.push_back(
        {"language_model.model.layers.0.linear_attn.in_proj_b.weight_extra", "BF16", {1}});
    find(tensors, "language_model.model.layers.0.mlp.shared_expert_gate.scales")->shape = {1, 3};
    const CheckpointLayout layout = describe_layout(tiny_config(), tensors);
    EXPECT_NE(problem_about(layout, ProblemKind::Inconsistent,
                            "language_model.model.layers.0.mlp.gate.weight"),
              nullptr)
        << problems_text(layout);
    EXPECT_NE(problem_about(layout, ProblemKind::Shape,
                            "language_model.model.layers.0.mlp.shared_expert_gate.scales"),
              nullptr);
    EXPECT_EQ(layout.unknown.size(), 1u);
}

TEST(CheckpointLayout, MlxVlmConcatenatedTableIsFolded) {
    std::vector<TensorEntry> tensors;
    for (const TensorEntry& entry : mlx_tensors(4)) {
        if (entry.name.find("ngram_embedding.shard_") != std::string::npos) continue;
        tensors.push_back(entry);
    }
    tensors.push_back({"language_model.model.layers.1.ple.ple_embedding.ngram_embedding.weight",
                       "BF16",
                       {424, 16}});
    const CheckpointLayout layout = describe_layout(tiny_config(), tensors);
    ASSERT_TRUE(layout.ok()) << problems_text(layout);
    EXPECT_TRUE(layout.ple_layers.at(0).concatenated);
    EXPECT_EQ(layout.ple_layers.at(0).rows, 424);
    EXPECT_EQ(layout.norm_convention, NormConvention::Folded);
}

}  // namespace
}  // namespace cherenkov::model_data::qwen4_exp
