// What the GPU tests share: whether a CUDA device is usable, and a fixture base that skips its
// tests (saying why) when none is, so the suite passes on machines without a GPU.
#pragma once

#include <gtest/gtest.h>

#include "engine/cuda/device_info.h"

namespace cherenkov::engine::cuda {

inline bool have_device() {
    return !query_devices().devices.empty();
}

class DeviceTest : public ::testing::Test {
protected:
    void SetUp() override {
        const DeviceQuery query = query_devices();
        if (query.devices.empty()) GTEST_SKIP() << "no CUDA device: " << query.unavailable_reason;
    }
};

}  // namespace cherenkov::engine::cuda
