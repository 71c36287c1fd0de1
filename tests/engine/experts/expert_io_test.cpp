#include "engine/experts/expert_io.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace cherenkov::engine {
namespace {

// A reader whose first read blocks until the test opens the gate, so the queue fills up behind
// it; records the offsets it reads in order.
class GateReader final : public RecordReader {
public:
    RecordRead read(std::span<std::byte> out, uint64_t offset) override {
        std::unique_lock lock(mutex_);
        order_.push_back(offset);
        ++started_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return open_; });
        return RecordRead{out.size(), 0};
    }
    uint64_t size_bytes() const override { return 1 << 20; }
    const std::string& path() const override { return path_; }
    bool direct() const override { return false; }

    void wait_started(int n) {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return started_ >= n; });
    }
    void open() {
        {
            std::lock_guard lock(mutex_);
            open_ = true;
        }
        changed_.notify_all();
    }
    std::vector<uint64_t> order() {
        std::lock_guard lock(mutex_);
        return order_;
    }

private:
    std::mutex mutex_;
    std::condition_variable changed_;
    bool open_ = false;
    int started_ = 0;
    std::vector<uint64_t> order_;
    std::string path_ = "gate";
};

struct Completions {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<uint64_t> offsets;

    void add(uint64_t offset) {
        {
            std::lock_guard lock(mutex);
            offsets.push_back(offset);
        }
        changed.notify_all();
    }
    void wait_for(size_t n) {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return offsets.size() >= n; });
    }
};

ReadJob job(GateReader& reader, ReadPriority priority, float weight, uint64_t offset) {
    static std::byte buffer[16];
    return ReadJob{.id = 0,
                   .priority = priority,
                   .weight = weight,
                   .reader = &reader,
                   .destination = std::span(buffer),
                   .offset = offset,
                   .slot = 0};
}

TEST(ExpertIo, DemandGoesBeforeLookaheadAndStrongerFirst) {
    GateReader reader;
    Completions done;
    ExpertIo io(1, [&](const ReadJob& j, const RecordRead&, uint64_t) { done.add(j.offset); });
    io.submit(job(reader, ReadPriority::Lookahead, 1.0F, 0));  // occupies the only worker
    reader.wait_started(1);
    io.submit(job(reader, ReadPriority::Lookahead, 0.9F, 1));
    io.submit(job(reader, ReadPriority::Demand, 0.1F, 2));
    io.submit(job(reader, ReadPriority::Lookahead, 0.5F, 3));
    io.submit(job(reader, ReadPriority::Demand, 0.7F, 4));
    io.submit(job(reader, ReadPriority::Demand, 0.7F, 5));  // tie: older first
    EXPECT_EQ(io.n_queued(), 5u);
    reader.open();
    done.wait_for(6);
    EXPECT_EQ(reader.order(), (std::vector<uint64_t>{0, 4, 5, 2, 1, 3}));
}

TEST(ExpertIo, PromotesAndCancelsQueuedReadsOnly) {
    GateReader reader;
    Completions done;
    ExpertIo io(1, [&](const ReadJob& j, const RecordRead&, uint64_t) { done.add(j.offset); });
    const uint64_t running = io.submit(job(reader, ReadPriority::Lookahead, 1.0F, 0));
    reader.wait_started(1);
    const uint64_t low = io.submit(job(reader, ReadPriority::Lookahead, 0.1F, 1));
    const uint64_t dropped = io.submit(job(reader, ReadPriority::Lookahead, 0.9F, 2));
    io.submit(job(reader, ReadPriority::Demand, 0.5F, 3));
    EXPECT_FALSE(io.promote(running, 1.0F));  // already reading
    EXPECT_FALSE(io.cancel(running));
    EXPECT_TRUE(io.promote(low, 0.8F));  // now a demand read stronger than offset 3
    EXPECT_TRUE(io.cancel(dropped));
    EXPECT_FALSE(io.cancel(dropped));
    reader.open();
    done.wait_for(3);
    EXPECT_EQ(reader.order(), (std::vector<uint64_t>{0, 1, 3}));
}

TEST(ExpertIo, SeveralReadsInFlight) {
    GateReader reader;
    Completions done;
    ExpertIo io(3, [&](const ReadJob& j, const RecordRead&, uint64_t) { done.add(j.offset); });
    for (uint64_t offset = 0; offset < 3; ++offset) {
        io.submit(job(reader, ReadPriority::Demand, 0.5F, offset));
    }
    reader.wait_started(3);  // all three block in the reader at once
    reader.open();
    done.wait_for(3);
}

TEST(ExpertIo, LookaheadWaitsWhileDemandReadsAreInFlight) {
    GateReader reader;
    Completions done;
    ExpertIo io(2, [&](const ReadJob& j, const RecordRead&, uint64_t) { done.add(j.offset); });
    io.submit(job(reader, ReadPriority::Demand, 0.5F, 0));
    reader.wait_started(1);
    io.submit(job(reader, ReadPriority::Lookahead, 0.5F, 1));
    // The second worker is free, but the lookahead read waits for the demand read.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(reader.order().size(), 1u);
    EXPECT_EQ(io.n_queued(), 1u);
    reader.open();
    done.wait_for(2);
    EXPECT_EQ(reader.order(), (std::vector<uint64_t>{0, 1}));
}

TEST(ExpertIo, LookaheadMayRunBesideDemandWhenAllowed) {
    GateReader reader;
    Completions done;
    ExpertIo io(
        2, [&](const ReadJob& j, const RecordRead&, uint64_t) { done.add(j.offset); }, false);
    io.submit(job(reader, ReadPriority::Demand, 0.5F, 0));
    reader.wait_started(1);
    io.submit(job(reader, ReadPriority::Lookahead, 0.5F, 1));
    reader.wait_started(2);
    reader.open();
    done.wait_for(2);
}

TEST(ExpertIo, DestructionDropsQueuedReads) {
    GateReader reader;
    Completions done;
    {
        ExpertIo io(1, [&](const ReadJob& j, const RecordRead&, uint64_t) { done.add(j.offset); });
        io.submit(job(reader, ReadPriority::Demand, 0.5F, 0));
        reader.wait_started(1);
        io.submit(job(reader, ReadPriority::Demand, 0.5F, 1));
        reader.open();
    }
    // The read in flight completed; the queued one may have started before the destructor ran.
    EXPECT_GE(done.offsets.size(), 1u);
    EXPECT_EQ(done.offsets.front(), 0u);
}

}  // namespace
}  // namespace cherenkov::engine
