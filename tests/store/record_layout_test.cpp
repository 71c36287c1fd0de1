#include "store/manifest/record_layout.h"

#include <gtest/gtest.h>

#include "base/error.h"

namespace cherenkov::store {
namespace {

TEST(ExpertLayout, PlacesProjectionsOnAlignedBoundaries) {
    // FN shapes: H 2560, I 640 (issue 4's benchmark shapes).
    const ExpertLayout layout = make_expert_layout(2560, 640, 4, 64, 40, 1, 512);
    EXPECT_EQ(layout.gate.codes.offset, 0u);
    EXPECT_EQ(layout.gate.codes.n_bytes, 640u * 2560 / 2);
    EXPECT_EQ(layout.gate.scales.n_bytes, 640u * 40 * 2);
    EXPECT_EQ(layout.gate.scales.offset, layout.gate.codes.end());
    EXPECT_EQ(layout.up.codes.offset % kPartAlign, 0u);
    EXPECT_EQ(layout.down.rows, 2560u);
    EXPECT_EQ(layout.down.cols, 640u);
    EXPECT_EQ(layout.down.scales.n_bytes, 2560u * 10 * 2);
    const uint64_t payload = 3 * (640u * 2560 / 2 + 2 * 640u * 40 * 2);
    EXPECT_EQ(layout.down.biases.end(), payload);
    EXPECT_EQ(layout.record_bytes % kRecordAlign, 0u);
    EXPECT_GE(layout.record_bytes, payload);
    EXPECT_LT(layout.record_bytes, payload + kRecordAlign);
}

TEST(ExpertLayout, IndexesMtpLayersAfterTrunk) {
    const ExpertLayout layout = make_expert_layout(64, 64, 4, 64, 4, 1, 6);
    EXPECT_EQ(layout.n_layers(), 5);
    EXPECT_EQ(layout.n_records(), 30u);
    EXPECT_EQ(layout.record_index(4, 0), 24u);  // first MTP layer follows the 4 trunk layers
    EXPECT_EQ(layout.record_offset(2, 3), 15u * layout.record_bytes);
    EXPECT_EQ(layout.file_bytes(), 30u * layout.record_bytes);
}

TEST(ExpertLayout, ThreeBitCodesStraddleNoGroups) {
    const ExpertLayout layout = make_expert_layout(128, 64, 3, 64, 1, 0, 1);
    EXPECT_EQ(layout.gate.codes.n_bytes, 64u * 128 * 3 / 8);
    EXPECT_EQ(layout.down.codes.n_bytes, 128u * 64 * 3 / 8);
}

TEST(ExpertLayout, RejectsWidthsNotMultipleOfGroup) {
    EXPECT_THROW(make_expert_layout(96, 64, 4, 64, 1, 0, 1), Error);
    EXPECT_THROW(make_expert_layout(64, 64, 5, 64, 1, 0, 1), Error);
    EXPECT_THROW(make_expert_layout(64, 64, 4, 64, 1, 0, 0), Error);
}

}  // namespace
}  // namespace cherenkov::store
