// Host checkpoints of CUDA sequence states (engine/generate/state_checkpoint.h over
// DeviceSequence::save/restore): the checks of tests/engine/generate/state_checkpoint_test.cpp
// on the device, for every fixture form with MTP drafts on. A checkpoint restored into a fresh
// device state continues bit for bit as the generation never checkpointed: from prefixes ending
// inside and at the edge of a QSA block and a PLE window, from the whole prompt, and before every
// decode step. Skips without a device.
#include <gtest/gtest.h>

#include "engine/cuda/cuda_model.h"
#include "engine/cuda/device_test.h"
#include "engine/experts/direct_expert_reader.h"
#include "engine/generate/checkpoint_checks.h"
#include "engine/generate/sequence_switcher.h"
#include "engine/model/fixture_engine.h"
#include "engine/model/fixture_forms.h"

namespace cherenkov::testing {
namespace {

using engine::cuda::have_device;

struct DeviceModel {
    explicit DeviceModel(const std::string& checkpoint)
        : cpu(checkpoint),
          experts(cpu.weights->store_dir + "/experts.bin", cpu.weights->manifest.experts) {
        engine::cuda::CudaModelOptions options;
        options.pool = engine::PoolSetting::of(engine::PoolMode::Max);
        options.max_ctx = 256;
        options.prefill_quantum = engine::PrefillQuantum::of(64);
        gpu = engine::cuda::make_cuda_model(*cpu.weights, experts, options);
    }
    FixtureEngine cpu;
    engine::DirectExpertReader experts;
    std::unique_ptr<engine::ModelBackend> gpu;
};

class CudaCheckpointForms : public ::testing::TestWithParam<const char*> {};

TEST_P(CudaCheckpointForms, RestoreThenDecodeEqualsUninterruptedDecodeBitForBit) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    const std::string checkpoint = GetParam();
    DeviceModel m(checkpoint);
    // Only tiny_a carries MTP tensors (tests/fixtures/README.md); drafts are on wherever a head is.
    if (checkpoint == "tiny_a/hf_flat_fused") {
        ASSERT_TRUE(m.gpu->has_mtp());
    }
    ReferenceFile reference(reference_of(checkpoint) + "/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.len33");
    check_checkpoints_are_exact(
        *m.gpu, prompt, edge_splits(m.cpu.weights->config, static_cast<int64_t>(prompt.size())),
        checkpoint);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CudaCheckpointForms, CHERENKOV_FIXTURE_FORMS, fixture_form_name);

// The server's path: one set of device caches handed between sequences by a SequenceSwitcher; a
// checkpoint saved from the active state is restored into the shared caches for another
// generation of the same prompt, which continues exactly as the first.
TEST(CudaStateCheckpoint, RestoredIntoTheSwitchersSharedCachesContinuesExactly) {
    if (!have_device()) GTEST_SKIP() << "no CUDA device";
    DeviceModel m("tiny_a/hf_flat_fused");
    ReferenceFile reference("tiny_a/reference/logits.safetensors");
    const std::vector<int32_t> prompt = reference.tokens("input_ids.chat");
    const engine::GenerationOptions options = checkpoint_options(40, 256);
    engine::SequenceSwitcher switcher(*m.gpu, 256);
    ASSERT_TRUE(switcher.shares_caches());
    const auto k = static_cast<int64_t>(prompt.size()) - 3;

    engine::ParkedCaches parked;
    engine::Generator first(*m.gpu, options);
    std::optional<engine::SequenceState> state = switcher.new_state(256);
    switcher.activate(*state, parked);
    first.start(prompt, std::move(state));
    Emitted expected;
    const auto record = [&](Emitted& out) {
        return [&out](const engine::EmittedToken& t) {
            out.add(t);
            return true;
        };
    };
    first.step(record(expected), k);
    const engine::StateCheckpoint c = engine::save_checkpoint(first.state());
    EXPECT_FALSE(c.device.empty());
    while (first.step(record(expected))) {
    }
    switcher.release(first.state());

    engine::ParkedCaches fresh;
    std::optional<engine::SequenceState> restored = switcher.new_state(256);
    switcher.activate(*restored, fresh);
    engine::restore_checkpoint(c, *restored);
    engine::Generator second(*m.gpu, options);
    second.start(prompt, std::move(restored));
    Emitted resumed;
    while (second.step(record(resumed))) {
    }
    switcher.release(second.state());
    EXPECT_EQ(resumed.tokens, expected.tokens);
    EXPECT_TRUE(same_bits(resumed.logits, expected.logits));
    // Against the CPU's greedy text too.
    engine::GenerationOptions plain = options;
    plain.token_logits = false;
    EXPECT_EQ(resumed.tokens, generate_tokens(m.cpu.model, prompt, plain));
}

}  // namespace
}  // namespace cherenkov::testing
