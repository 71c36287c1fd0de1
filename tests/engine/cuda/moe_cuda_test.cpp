// DeviceExpertPool's LRU order, pinning, counters and whole layers on the device. The MoE block
// itself is checked against the CPU in ops_vs_cpu_moe_test.cpp. Skips without a device; in a
// build without CUDA it checks that construction says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cuda/device_expert_pool.h"
#include "engine/cuda/device_info.h"
#include "engine/cuda/device_test.h"
#include "engine/experts/expert_source.h"
#include "store/manifest/record_layout.h"

namespace cherenkov::engine::cuda {
namespace {

// ---- DeviceExpertPool ----

constexpr int64_t kHidden = 64;
constexpr int64_t kInter = 128;

store::ExpertLayout test_layout(int bits) {
    return store::make_expert_layout(kHidden, kInter, bits, 64, 2, 0, 4);
}

// Host records with a distinct byte pattern each.
struct HostRecords {
    explicit HostRecords(const store::ExpertLayout& l) : layout(l) {
        for (uint64_t r = 0; r < l.n_records(); ++r) {
            std::vector<std::byte> bytes(l.record_bytes);
            for (size_t i = 0; i < bytes.size(); ++i) {
                bytes[i] = static_cast<std::byte>((r * 131 + i * 7 + (i >> 8)) & 0xFF);
            }
            records.push_back(std::move(bytes));
        }
    }
    ExpertWeights weights(int64_t layer, int32_t expert) const {
        ExpertWeights w =
            expert_weights_in_record(records[layout.record_index(layer, expert)].data(), layout);
        w.bits = layout.bits;
        return w;
    }
    bool matches(const std::vector<std::byte>& slot, int64_t layer, int32_t expert) const {
        const std::vector<std::byte>& r = records[layout.record_index(layer, expert)];
        return std::memcmp(slot.data(), r.data(), layout.down.biases.end()) == 0;
    }
    store::ExpertLayout layout;
    std::vector<std::vector<std::byte>> records;
};

class CudaDeviceExpertPool : public DeviceTest {};

TEST(DeviceExpertPoolSize, SlotsHoldTheLargestPrecisionRoundedTo256) {
    const store::ExpertLayout q4 = test_layout(4);
    const store::ExpertLayout q2 = test_layout(2);
    EXPECT_EQ(DeviceExpertPool::slot_bytes_for(q4), store::align_up(q4.down.biases.end(), 256));
    EXPECT_EQ(DeviceExpertPool::slot_bytes_for(q2, 4), DeviceExpertPool::slot_bytes_for(q4));
    EXPECT_LT(DeviceExpertPool::slot_bytes_for(q2), DeviceExpertPool::slot_bytes_for(q4));
    EXPECT_LE(DeviceExpertPool::slot_bytes_for(q4), q4.record_bytes);
    const uint64_t slot = DeviceExpertPool::slot_bytes_for(q4);
    EXPECT_EQ(DeviceExpertPool::slots_for_bytes(q4, 10 * slot + slot / 2), 10);
}

TEST_F(CudaDeviceExpertPool, EvictsTheLeastRecentlyUsedSlotAndCounts) {
    const HostRecords host(test_layout(4));
    DeviceExpertPool pool(host.layout, 2, nullptr);
    const DeviceExpert a = pool.acquire(0, 0, host.weights(0, 0));
    pool.release_pinned();
    pool.acquire(0, 1, host.weights(0, 1));
    pool.release_pinned();
    const DeviceExpert a_again = pool.acquire(0, 0, host.weights(0, 0));  // hit: now newest
    pool.release_pinned();
    EXPECT_EQ(a_again.slot, a.slot);
    EXPECT_EQ(a_again.address.down_codes, a.address.down_codes);
    const DeviceExpert c = pool.acquire(1, 2, host.weights(1, 2));  // evicts (0, 1)
    pool.release_pinned();
    pool.wait_host_copies();
    EXPECT_EQ(pool.slot_of(0, 1, 4), -1);
    EXPECT_EQ(pool.slot_of(0, 0, 4), a.slot);
    EXPECT_EQ(pool.slot_of(1, 2, 4), c.slot);
    EXPECT_NE(c.slot, a.slot);
    EXPECT_TRUE(host.matches(pool.read_slot(a.slot), 0, 0));
    EXPECT_TRUE(host.matches(pool.read_slot(c.slot), 1, 2));

    const TierCounters n = pool.counters();  // misses: uploads, fill_bytes: bytes uploaded
    EXPECT_EQ(n.hits, 1U);
    EXPECT_EQ(n.misses, 3U);
    EXPECT_EQ(n.evictions, 1U);
    EXPECT_EQ(n.fill_bytes, 3 * host.layout.down.biases.end());
    EXPECT_EQ(pool.bytes(), 2 * pool.slot_bytes());

    // The device addresses follow the store's part offsets inside the slot.
    EXPECT_EQ(
        reinterpret_cast<const std::byte*>(c.address.down_biases) -
            reinterpret_cast<const std::byte*>(c.address.gate_codes),
        static_cast<ptrdiff_t>(host.layout.down.biases.offset - host.layout.gate.codes.offset));
    EXPECT_EQ(c.shape.bits, 4);
    EXPECT_EQ(c.shape.hidden, kHidden);
    EXPECT_EQ(c.shape.intermediate, kInter);
}

// copy_ahead fills a slot without pinning it and without a compute-stream wait of its own; the
// next hand-out waits for it, a resident record is not copied again, and the counters say what
// went ahead and what a later call used.
TEST_F(CudaDeviceExpertPool, CopiesAheadUnpinnedAndCountsTheOnesUsed) {
    const HostRecords host(test_layout(4));
    DeviceExpertPool pool(host.layout, 3, nullptr);
    pool.acquire(0, 0, host.weights(0, 0));
    pool.release_pinned();
    pool.copy_ahead(1, 1, host.weights(1, 1));
    pool.copy_ahead(1, 2, host.weights(1, 2));
    pool.copy_ahead(0, 0, host.weights(0, 0));  // resident: nothing to copy
    pool.finish_batch(false);
    EXPECT_EQ(pool.copied_ahead(), 2U);
    EXPECT_EQ(pool.used_ahead(), 0U);
    const int32_t ahead = pool.slot_of(1, 1, 4);
    ASSERT_GE(ahead, 0);
    EXPECT_FALSE(pool.pinned(ahead));
    const std::optional<DeviceExpert> used = pool.acquire_resident(1, 1, 4);
    ASSERT_TRUE(used.has_value());
    EXPECT_EQ(used->slot, ahead);
    pool.release_pinned();
    pool.wait_host_copies();
    EXPECT_TRUE(host.matches(pool.read_slot(ahead), 1, 1));
    EXPECT_TRUE(host.matches(pool.read_slot(pool.slot_of(1, 2, 4)), 1, 2));
    EXPECT_EQ(pool.used_ahead(), 1U);
    pool.acquire_resident(1, 1, 4);  // a second hit on it is an ordinary one
    pool.release_pinned();
    EXPECT_EQ(pool.used_ahead(), 1U);
    const TierCounters n = pool.counters();
    EXPECT_EQ(n.misses, 3U);  // (0, 0), and the two copied ahead
    EXPECT_EQ(n.hits, 2U);
}

TEST_F(CudaDeviceExpertPool, NeverEvictsPinnedSlots) {
    const HostRecords host(test_layout(4));
    DeviceExpertPool pool(host.layout, 2, nullptr);
    const DeviceExpert a = pool.acquire(0, 0, host.weights(0, 0));
    const DeviceExpert b = pool.acquire(0, 1, host.weights(0, 1));
    EXPECT_TRUE(pool.pinned(a.slot));
    EXPECT_TRUE(pool.pinned(b.slot));
    try {
        pool.acquire(0, 2, host.weights(0, 2));
        FAIL() << "acquire with every slot pinned did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::ResourceExhausted);
    }
    pool.release_pinned();
    EXPECT_FALSE(pool.pinned(a.slot));
    EXPECT_FALSE(pool.pinned(b.slot));
    const DeviceExpert c = pool.acquire(0, 2, host.weights(0, 2));  // the oldest, (0, 0), goes
    pool.finish_batch();
    EXPECT_EQ(c.slot, a.slot);
    EXPECT_FALSE(pool.pinned(c.slot));
    EXPECT_EQ(pool.slot_of(0, 0, 4), -1);
    EXPECT_TRUE(host.matches(pool.read_slot(c.slot), 0, 2));
    EXPECT_TRUE(host.matches(pool.read_slot(b.slot), 0, 1));
}

TEST_F(CudaDeviceExpertPool, KeepsPrecisionsInSeparateSlots) {
    const HostRecords q4(test_layout(4));
    const HostRecords q2(test_layout(2));
    DeviceExpertPool pool(q4.layout, 3, nullptr);
    const DeviceExpert high = pool.acquire(1, 3, q4.weights(1, 3));
    const DeviceExpert low = pool.acquire(1, 3, q2.weights(1, 3));
    pool.release_pinned();
    pool.wait_host_copies();
    EXPECT_NE(high.slot, low.slot);
    EXPECT_EQ(low.shape.bits, 2);
    EXPECT_EQ(pool.slot_of(1, 3, 2), low.slot);
    EXPECT_EQ(pool.slot_of(1, 3, 4), high.slot);
    EXPECT_EQ(reinterpret_cast<const std::byte*>(low.address.down_codes) -
                  reinterpret_cast<const std::byte*>(low.address.gate_codes),
              static_cast<ptrdiff_t>(q2.layout.down.codes.offset - q2.layout.gate.codes.offset));
    EXPECT_TRUE(q2.matches(pool.read_slot(low.slot), 1, 3));
    EXPECT_TRUE(q4.matches(pool.read_slot(high.slot), 1, 3));
}

// A pool that can hold the whole table puts a layer's addresses on the device once every expert
// of it is resident, and lists what a layer misses while few are missing; a smaller pool does
// neither; an eviction (here: other precisions taking the slots) takes the layer off again.
TEST_F(CudaDeviceExpertPool, PutsALayerHeldWholeOnTheDeviceUntilAnEviction) {
    const HostRecords q4(test_layout(4));
    const HostRecords q2(test_layout(2));
    DeviceExpertPool pool(q4.layout, 8, nullptr);  // 2 layers × 4 experts
    for (const int32_t e : {0, 1, 2}) pool.acquire(0, e, q4.weights(0, e));
    pool.release_pinned();
    EXPECT_EQ(pool.layer_addresses(0), nullptr);
    EXPECT_EQ(pool.missing_in_layer(0, 1), std::vector<int32_t>{3});
    EXPECT_TRUE(pool.missing_in_layer(1, 3).empty());  // 4 missing
    EXPECT_EQ(pool.missing_in_layer(1, 4), (std::vector<int32_t>{0, 1, 2, 3}));
    pool.leave_incomplete(1);
    EXPECT_TRUE(pool.missing_in_layer(1, 4).empty());

    pool.acquire(0, 3, q4.weights(0, 3));
    pool.release_pinned();
    ASSERT_NE(pool.layer_addresses(0), nullptr);
    EXPECT_EQ(pool.layer_addresses(1), nullptr);
    EXPECT_EQ(pool.n_layers_on_device(), 1);
    EXPECT_TRUE(pool.missing_in_layer(0, 4).empty());
    const std::vector<ExpertAddress> addresses = pool.read_layer_addresses(0);
    for (int32_t e = 0; e < 4; ++e) {
        const std::optional<DeviceExpert> resident = pool.acquire_resident(0, e, 4);
        ASSERT_TRUE(resident.has_value());
        EXPECT_EQ(addresses[static_cast<size_t>(e)].gate_codes, resident->address.gate_codes);
        EXPECT_EQ(addresses[static_cast<size_t>(e)].down_biases, resident->address.down_biases);
    }
    pool.release_pinned();
    pool.release_layer(0);

    // Four 2-bit records take the free slots; the fifth evicts the least recently used slot,
    // one of layer 0's.
    for (const int32_t e : {0, 1, 2, 3}) pool.acquire(1, e, q2.weights(1, e));
    pool.release_pinned();
    EXPECT_NE(pool.layer_addresses(0), nullptr);
    pool.acquire(0, 0, q2.weights(0, 0));
    pool.release_pinned();
    EXPECT_EQ(pool.counters().evictions, 1U);
    EXPECT_EQ(pool.layer_addresses(0), nullptr);
    EXPECT_EQ(pool.n_layers_on_device(), 0);

    DeviceExpertPool small(q4.layout, 7, nullptr);
    for (const int32_t e : {0, 1, 2, 3}) small.acquire(0, e, q4.weights(0, e));
    small.release_pinned();
    EXPECT_EQ(small.layer_addresses(0), nullptr);
    EXPECT_TRUE(small.missing_in_layer(1, 4).empty());
}

TEST(DeviceExpertPoolUnavailable, ConstructionSaysBuiltWithoutCuda) {
    if (query_devices().built_with_cuda) GTEST_SKIP() << "built with CUDA";
    try {
        DeviceExpertPool pool(test_layout(4), 2, nullptr);
        FAIL() << "DeviceExpertPool did not throw";
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Unsupported);
    }
}

}  // namespace
}  // namespace cherenkov::engine::cuda
