// A request keeps the snapshot of the server's defaults it was parsed with: omitted fields take
// it, given fields override it.
#include <gtest/gtest.h>

#include "serving/completion_request.h"

namespace cherenkov::serving {
namespace {

TEST(RequestDefaults, ARequestKeepsTheDefaultsItArrivedWith) {
    config::GenerationDefaults defaults;
    defaults.max_tokens = 12;
    defaults.stop_at_eos = false;
    defaults.sampling.temperature = 0.8F;
    defaults.sampling.top_k = 7;
    const CompletionRequest request =
        parse_completion_request(R"({"prompt": "x", "top_k": 3})", Endpoint::Completion, defaults);
    // A later change of the server's defaults does not reach the parsed request.
    defaults.sampling.temperature = 0.1F;
    EXPECT_EQ(request.defaults.max_tokens, 12);
    EXPECT_FALSE(request.defaults.stop_at_eos);
    const engine::SamplingOptions sampling = request.sampling.over(request.defaults.sampling);
    EXPECT_FLOAT_EQ(sampling.temperature, 0.8F);
    EXPECT_EQ(sampling.top_k, 3);
}

TEST(RequestDefaults, WithoutASnapshotTheBuiltInDefaultsApply) {
    const CompletionRequest request = parse_completion_request(
        R"({"messages": [{"role": "user", "content": "hi"}]})", Endpoint::Chat);
    EXPECT_EQ(request.defaults.max_tokens, 0);
    EXPECT_TRUE(request.defaults.stop_at_eos);
    EXPECT_FLOAT_EQ(request.defaults.sampling.temperature, 0.0F);
}

}  // namespace
}  // namespace cherenkov::serving
