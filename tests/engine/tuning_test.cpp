// engine::Tuning's `key=value` parser: defaults are the product, every key round-trips, and bad
// settings fail naming the setting and the key.
#include "engine/tuning.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

std::string message_of(std::string_view setting) {
    Tuning tuning;
    try {
        apply_tuning(tuning, setting);
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        return e.what();
    }
    ADD_FAILURE() << "accepted '" << setting << "'";
    return "";
}

TEST(Tuning, DefaultsTurnEveryPathOn) {
    const Tuning tuning = parse_tuning({});
    EXPECT_EQ(tuning, Tuning{});
    EXPECT_TRUE(tuning.cuda_graphs && tuning.step_graphs && tuning.device_routing &&
                tuning.side_streams && tuning.launch_overlap && tuning.gemm_mma &&
                tuning.gemv_mma && tuning.gemv_bulk && tuning.gemv_slices && tuning.expert_layer &&
                tuning.nt_fill && tuning.cpu_avx512);
    EXPECT_EQ(tuning.io_piece_kib, -1);
    EXPECT_EQ(tuning.next_layer_copies, 2);
    EXPECT_TRUE(tuning_settings(tuning).empty());
}

TEST(Tuning, SettingsApplyInOrder) {
    const std::vector<std::string> settings{"cuda_graphs=off", "expert_layer=0", "io_piece_kib=0",
                                            "cuda_graphs=on", "gemv_bulk=false"};
    const Tuning tuning = parse_tuning(settings);
    EXPECT_TRUE(tuning.cuda_graphs);
    EXPECT_FALSE(tuning.expert_layer);
    EXPECT_FALSE(tuning.gemv_bulk);
    EXPECT_EQ(tuning.io_piece_kib, 0);
    EXPECT_EQ(tuning_settings(tuning),
              (std::vector<std::string>{"gemv_bulk=off", "expert_layer=off", "io_piece_kib=0"}));
}

TEST(Tuning, EveryKeyRoundTrips) {
    for (const std::string_view key : tuning_keys()) {
        const std::string setting = std::string(key) + (key == "io_piece_kib"        ? "=1024"
                                                        : key == "next_layer_copies" ? "=5"
                                                                                     : "=off");
        const std::vector<std::string> settings{setting};
        const Tuning tuning = parse_tuning(settings);
        EXPECT_NE(tuning, Tuning{}) << key;
        EXPECT_EQ(tuning_settings(tuning), settings) << key;
        EXPECT_EQ(parse_tuning(tuning_settings(tuning)), tuning) << key;
    }
    EXPECT_EQ(tuning_keys().size(), 14U);
}

TEST(Tuning, BadSettingsNameTheKey) {
    const std::string unknown = message_of("cuda_graph=off");
    EXPECT_NE(unknown.find("--tuning 'cuda_graph=off'"), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("unknown key 'cuda_graph'"), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("cuda_graphs, step_graphs"), std::string::npos) << unknown;

    const std::string no_value = message_of("cuda_graphs");
    EXPECT_NE(no_value.find("expected key=value"), std::string::npos) << no_value;

    const std::string bad_bool = message_of("gemv_mma=maybe");
    EXPECT_NE(bad_bool.find("key 'gemv_mma'"), std::string::npos) << bad_bool;
    EXPECT_NE(bad_bool.find("'maybe'"), std::string::npos) << bad_bool;

    for (const char* bad : {"io_piece_kib=", "io_piece_kib=-1", "io_piece_kib=12k",
                            "io_piece_kib=1048577", "io_piece_kib=99999999999999999999"}) {
        const std::string message = message_of(bad);
        EXPECT_NE(message.find("key 'io_piece_kib'"), std::string::npos) << message;
    }
    const std::string copies = message_of("next_layer_copies=65");
    EXPECT_NE(copies.find("key 'next_layer_copies' takes a whole number of experts, 0-64"),
              std::string::npos)
        << copies;
    EXPECT_NE(message_of("=on").find("unknown key ''"), std::string::npos);
    EXPECT_NE(message_of("cuda_graphs=ON").find("key 'cuda_graphs'"), std::string::npos);
}

}  // namespace
}  // namespace cherenkov::engine
