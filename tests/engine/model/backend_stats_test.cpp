// The backend statistics' one serialisation keeps the keys bench/suite, bench/cuda_bench.sh, the
// web page and users' scripts read.
#include "engine/model/backend_stats.h"

#include <gtest/gtest.h>

namespace cherenkov::engine {
namespace {

TEST(BackendStats, NoFiguresSerialiseAsNull) {
    EXPECT_TRUE(backend_stats_json(BackendStats{}).is_null());
}

TEST(BackendStats, DeviceFiguresKeepTheirKeys) {
    DeviceFigures d;
    d.name = "H100";
    d.total_bytes = 80;
    d.free_bytes = 30;
    d.expert_pool_bytes = 12;
    d.expert_pool = "device max pool";
    d.step_graph_launches = 7;
    d.scratch_reserved_bytes = 5;
    d.decode_phases = {{"layers", 0}};
    d.cpu_experts = "auto";
    d.cpu_experts_computed = 4;
    d.pool = DevicePoolCounters{.hits = 3, .uploads = 1, .upload_bytes = 9, .evictions = 0};
    const nlohmann::json out = backend_stats_json(BackendStats{.device = d});
    for (const char* key : {"device",
                            "device_total_bytes",
                            "device_free_bytes",
                            "device_weights_bytes",
                            "device_expert_pool_bytes",
                            "device_expert_pool",
                            "host_records_page_locked_bytes",
                            "cuda_graphs",
                            "cuda_side_streams",
                            "cuda_graph_captures",
                            "cuda_graph_launches",
                            "cuda_step_graphs",
                            "cuda_step_graph_captures",
                            "cuda_step_graph_launches",
                            "device_scratch_bytes",
                            "device_scratch_reserved_bytes",
                            "prefill_rows_per_call",
                            "device_routing",
                            "shared_expert_layers_on_expert_kernels",
                            "device_routed_layers",
                            "device_routed_calls",
                            "decode_phases",
                            "cpu_experts",
                            "cpu_experts_computed",
                            "cpu_experts_seconds",
                            "cpu_experts_copied",
                            "cpu_experts_share",
                            "cpu_experts_activations",
                            "experts_copied_ahead",
                            "experts_used_ahead",
                            "device_expert_hits",
                            "device_expert_uploads",
                            "device_expert_upload_bytes",
                            "device_expert_evictions",
                            "device_expert_hit_rate"}) {
        EXPECT_TRUE(out.contains(key)) << key;
    }
    EXPECT_EQ(out.size(), 35U);
    EXPECT_EQ(out["device"], "H100");
    EXPECT_EQ(out["device_total_bytes"].get<uint64_t>() - out["device_free_bytes"].get<uint64_t>(),
              50U);
    EXPECT_EQ(out["cuda_step_graph_launches"].get<uint64_t>(), 7U);
    EXPECT_DOUBLE_EQ(out["device_expert_hit_rate"].get<double>(), 0.75);
    EXPECT_EQ(out["decode_phases"]["layers"], 0);
    EXPECT_EQ(out["cpu_experts"], "auto");
    EXPECT_EQ(out["cpu_experts_computed"], 4);
    EXPECT_FALSE(out.contains("check"));
}

TEST(BackendStats, CheckFiguresAloneMakeAnObjectOfTheirOwn) {
    const nlohmann::json out = backend_stats_json(
        BackendStats{.check = CheckFigures{.calls = 2, .rows = 3, .max_abs_logit_diff = 0.5}});
    ASSERT_TRUE(out.is_object());
    EXPECT_EQ(out.size(), 1U);
    EXPECT_EQ(out["check"]["calls"], 2);
    EXPECT_EQ(out["check"]["rows"], 3);
    EXPECT_EQ(out["check"]["max_abs_logit_diff"], 0.5);
    EXPECT_EQ(out["check"]["selected_equal"], 0);
}

}  // namespace
}  // namespace cherenkov::engine
