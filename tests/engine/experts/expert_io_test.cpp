#include "engine/experts/expert_io.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <tuple>
#include <utility>
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

// Fills each read with its file offsets (one byte per offset, mod 251) and records the pieces;
// reads at `fail_at` fail with EIO and reads at `short_at` stop halfway.
class PatternReader final : public RecordReader {
public:
    RecordRead read(std::span<std::byte> out, uint64_t offset) override {
        {
            std::lock_guard lock(mutex_);
            pieces_.emplace_back(offset, out.size());
        }
        if (offset == fail_at) return RecordRead{0, EIO};
        const uint64_t n = offset == short_at ? out.size() / 2 : out.size();
        for (uint64_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>((offset + i) % 251);
        return RecordRead{n, 0};
    }
    uint64_t size_bytes() const override { return uint64_t{1} << 30; }
    const std::string& path() const override { return path_; }
    bool direct() const override { return false; }

    std::vector<std::pair<uint64_t, uint64_t>> pieces() {
        std::lock_guard lock(mutex_);
        std::vector<std::pair<uint64_t, uint64_t>> sorted = pieces_;
        std::sort(sorted.begin(), sorted.end());
        return sorted;
    }

    uint64_t fail_at = ~uint64_t{0};
    uint64_t short_at = ~uint64_t{0};

private:
    std::mutex mutex_;
    std::vector<std::pair<uint64_t, uint64_t>> pieces_;
    std::string path_ = "pattern";
};

struct Landed {
    std::mutex mutex;
    std::condition_variable changed;
    std::vector<std::pair<ReadJob, RecordRead>> reads;

    void add(const ReadJob& job, const RecordRead& read) {
        {
            std::lock_guard lock(mutex);
            reads.emplace_back(job, read);
        }
        changed.notify_all();
    }
    void wait_for(size_t n) {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return reads.size() >= n; });
    }
    ExpertIo::OnComplete handler() {
        return [this](const ReadJob& j, const RecordRead& r, uint64_t) { add(j, r); };
    }
};

constexpr uint64_t kPieceBytes = uint64_t{1} << 20;
constexpr uint64_t kRecordOffset = uint64_t{3} << 20;

ReadJob whole_record(RecordReader& reader, std::span<std::byte> buffer) {
    return ReadJob{.id = 0,
                   .priority = ReadPriority::Demand,
                   .weight = 0.5F,
                   .reader = &reader,
                   .destination = buffer,
                   .offset = kRecordOffset,
                   .slot = 7,
                   .may_split = true};
}

TEST(ExpertIo, CutsALargeReadIntoPiecesAndCompletesItOnce) {
    PatternReader reader;
    Landed landed;
    std::vector<std::byte> buffer((uint64_t{4} << 20) + 8192);
    {
        ExpertIo io(4, landed.handler(), true, kPieceBytes);
        io.submit(whole_record(reader, buffer));
        landed.wait_for(1);
    }
    ASSERT_EQ(landed.reads.size(), 1u);
    const auto& [job, read] = landed.reads.front();
    EXPECT_EQ(job.offset, kRecordOffset);
    EXPECT_EQ(job.destination.size(), buffer.size());
    EXPECT_EQ(job.slot, 7u);
    EXPECT_EQ(read.n_bytes, buffer.size());
    EXPECT_EQ(read.error_number, 0);
    // Four pieces, in order and without gaps, each starting at a multiple of the alignment.
    const auto pieces = reader.pieces();
    ASSERT_EQ(pieces.size(), 4u);
    uint64_t next = kRecordOffset;
    for (const auto& [offset, size] : pieces) {
        EXPECT_EQ(offset, next);
        EXPECT_EQ((offset - kRecordOffset) % ExpertIo::kPieceAlignment, 0u);
        next = offset + size;
    }
    EXPECT_EQ(next, kRecordOffset + buffer.size());
    for (size_t i = 0; i < buffer.size(); i += 4097) {
        ASSERT_EQ(buffer[i], static_cast<std::byte>((kRecordOffset + i) % 251)) << i;
    }
}

TEST(ExpertIo, APieceThatFailsOrStopsShortFailsTheWholeRead) {
    for (const bool fail : {true, false}) {
        PatternReader reader;
        Landed landed;
        std::vector<std::byte> buffer(uint64_t{4} << 20);
        ExpertIo io(4, landed.handler(), true, kPieceBytes);
        (fail ? reader.fail_at : reader.short_at) = kRecordOffset + (uint64_t{2} << 20);
        io.submit(whole_record(reader, buffer));
        landed.wait_for(1);
        const RecordRead read = landed.reads.front().second;
        if (fail) {
            EXPECT_EQ(read.error_number, EIO);
        } else {
            EXPECT_EQ(read.error_number, 0);
            EXPECT_EQ(read.n_bytes, buffer.size() - (uint64_t{1} << 19));
        }
    }
}

TEST(ExpertIo, ReadsNotMarkedMaySplitReadWhole) {
    PatternReader reader;
    Landed landed;
    std::vector<std::byte> buffer(uint64_t{4} << 20);
    ExpertIo io(4, landed.handler(), true, kPieceBytes);
    ReadJob read = whole_record(reader, buffer);
    read.may_split = false;
    io.submit(read);
    landed.wait_for(1);
    EXPECT_EQ(reader.pieces().size(), 1u);
    EXPECT_EQ(landed.reads.front().second.n_bytes, buffer.size());
}

TEST(ExpertIo, AnEmptyReadCompletes) {
    PatternReader reader;
    Landed landed;
    ExpertIo io(2, landed.handler());
    for (const bool may_split : {false, true}) {
        ReadJob read = whole_record(reader, {});
        read.may_split = may_split;
        io.submit(read);
    }
    landed.wait_for(2);
    for (const auto& [j, r] : landed.reads) EXPECT_EQ(r.n_bytes, 0u);
}

TEST(ExpertIo, SmallReadsOneThreadOrNoPieceSizeReadWhole) {
    for (const auto& [threads, piece_bytes, bytes] :
         {std::tuple{4, uint64_t{1} << 20, uint64_t{1} << 20},
          std::tuple{1, uint64_t{1} << 20, uint64_t{4} << 20},
          std::tuple{4, uint64_t{0}, uint64_t{4} << 20}}) {
        PatternReader reader;
        Landed landed;
        std::vector<std::byte> buffer(bytes);
        ExpertIo io(threads, landed.handler(), true, piece_bytes);
        io.submit(whole_record(reader, buffer));
        landed.wait_for(1);
        EXPECT_EQ(reader.pieces().size(), 1u) << threads << " threads, " << bytes << " bytes";
        EXPECT_EQ(landed.reads.front().second.n_bytes, bytes);
    }
}

TEST(ExpertIo, CancelAndPromoteTakeEveryQueuedPiece) {
    GateReader gate;
    PatternReader reader;
    Landed landed;
    std::vector<std::byte> first(uint64_t{2} << 20);
    std::vector<std::byte> second(uint64_t{2} << 20);
    ExpertIo io(2, landed.handler(), false, kPieceBytes);
    // Both workers wait in the gate, so the split reads queue behind them.
    io.submit(job(gate, ReadPriority::Demand, 1.0F, 0));
    io.submit(job(gate, ReadPriority::Demand, 1.0F, 1));
    gate.wait_started(2);
    ReadJob lookahead = whole_record(reader, first);
    lookahead.priority = ReadPriority::Lookahead;
    const uint64_t kept = io.submit(lookahead);
    lookahead.destination = second;
    lookahead.offset = uint64_t{64} << 20;
    const uint64_t dropped = io.submit(lookahead);
    EXPECT_EQ(io.n_queued(), 2u);
    EXPECT_TRUE(io.cancel(dropped));
    EXPECT_TRUE(io.promote(kept, 0.9F));
    EXPECT_EQ(io.n_queued(), 1u);
    gate.open();
    landed.wait_for(3);
    // Only the kept read's two pieces were read, and it landed once, as a demand read.
    EXPECT_EQ(reader.pieces().size(), 2u);
    int kept_landings = 0;
    for (const auto& [j, r] : landed.reads) {
        if (j.id == kept) {
            ++kept_landings;
            EXPECT_EQ(j.priority, ReadPriority::Demand);
            EXPECT_EQ(r.n_bytes, first.size());
        }
    }
    EXPECT_EQ(kept_landings, 1);
    EXPECT_FALSE(io.cancel(kept));
}

}  // namespace
}  // namespace cherenkov::engine
