#include "engine/experts/record_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "base/error.h"
#include "engine/experts/expert_test_tables.h"

namespace cherenkov::engine {
namespace {

using cherenkov::testing::TempDir;
using testing::record_matches;
using testing::write_test_table;

struct AlignedFree {
    void operator()(std::byte* p) const { std::free(p); }
};

std::unique_ptr<std::byte, AlignedFree> aligned_buffer(uint64_t n_bytes) {
    return std::unique_ptr<std::byte, AlignedFree>(
        static_cast<std::byte*>(std::aligned_alloc(4096, n_bytes)));
}

TEST(FileRecordReader, DirectAndBufferedReadsGiveIdenticalBytes) {
    TempDir dir;
    const ExpertTable table = write_test_table(dir, "experts.bin", 4, 3, 5);
    FileRecordReader buffered(table.path, DirectIo::Off);
    FileRecordReader direct(table.path, DirectIo::Auto);
    EXPECT_FALSE(buffered.direct());
    if (!direct.direct()) GTEST_SKIP() << "the temp file system refuses O_DIRECT";
    const uint64_t n_bytes = table.layout.record_bytes;
    auto a = aligned_buffer(n_bytes);
    auto b = aligned_buffer(n_bytes);
    for (int64_t layer = 0; layer < 3; ++layer) {
        for (int64_t expert = 0; expert < 5; ++expert) {
            const uint64_t offset = table.layout.record_offset(layer, expert);
            const RecordRead from_direct = direct.read(std::span(a.get(), n_bytes), offset);
            const RecordRead from_buffered = buffered.read(std::span(b.get(), n_bytes), offset);
            ASSERT_EQ(from_direct.error_number, 0);
            ASSERT_EQ(from_direct.n_bytes, n_bytes);
            ASSERT_EQ(from_buffered.n_bytes, n_bytes);
            EXPECT_EQ(std::memcmp(a.get(), b.get(), n_bytes), 0);
            EXPECT_TRUE(record_matches(a.get(), table.layout, layer, expert, 4));
        }
    }
    EXPECT_TRUE(direct.direct());
}

TEST(FileRecordReader, UnalignedReadsUseTheBufferedDescriptor) {
    TempDir dir;
    const ExpertTable table = write_test_table(dir, "experts.bin", 4, 1, 2);
    FileRecordReader reader(table.path, DirectIo::Auto);
    auto buffer = aligned_buffer(8192);
    // Offset 8 and length 100 are not O_DIRECT-aligned: still read correctly.
    const RecordRead read = reader.read(std::span(buffer.get() + 8, 100), 8);
    EXPECT_EQ(read.error_number, 0);
    EXPECT_EQ(read.n_bytes, 100u);
    uint64_t word = 0;
    std::memcpy(&word, buffer.get() + 8, 8);
    EXPECT_EQ(word, testing::pattern_word(0, 0, 4, 1));
}

TEST(FileRecordReader, ReportsAShortReadAtTheEndOfTheFile) {
    TempDir dir;
    const ExpertTable table = write_test_table(dir, "experts.bin", 4, 1, 2);
    FileRecordReader reader(table.path, DirectIo::Off);
    const uint64_t n_bytes = table.layout.record_bytes;
    auto buffer = aligned_buffer(2 * n_bytes);
    const RecordRead read = reader.read(std::span(buffer.get(), 2 * n_bytes), n_bytes);
    EXPECT_EQ(read.error_number, 0);
    EXPECT_EQ(read.n_bytes, n_bytes);
    EXPECT_EQ(reader.size_bytes(), 2 * n_bytes);
}

// Non-temporal fills give the bytes plain reads give: reads longer than the per-thread buffer,
// destinations at every alignment within 16 bytes, lengths that are not multiples of the store
// width, and a short read at the end of the file.
TEST(FileRecordReader, NonTemporalFillsGiveTheSameBytesAsPlainReads) {
    TempDir dir;
    const std::string path = dir.file("bytes.bin");
    std::vector<std::byte> bytes(700'001);
    uint64_t state = 7;
    for (std::byte& b : bytes) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        b = static_cast<std::byte>(state >> 56);
    }
    {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        ASSERT_NE(f, nullptr);
        ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
        std::fclose(f);
    }
    FileRecordReader plain(path, DirectIo::Off);
    FileRecordReader streamed(path, DirectIo::Off, BufferedFill::NonTemporal);
    auto a = aligned_buffer(1 << 20);
    auto b = aligned_buffer(1 << 20);
    const uint64_t cases[][2] = {{0, 700'001}, {3, 600'000},  {4096, 262'144}, {17, 15},
                                 {100, 64},    {699'990, 64}, {5, 262'145}};
    for (int shift = 0; shift < 16; ++shift) {
        for (const auto& [offset, length] : cases) {
            std::memset(a.get(), 0, 1 << 20);
            std::memset(b.get(), 0, 1 << 20);
            const RecordRead x = plain.read(std::span(a.get() + shift, length), offset);
            const RecordRead y = streamed.read(std::span(b.get() + shift, length), offset);
            ASSERT_EQ(x.error_number, 0);
            ASSERT_EQ(y.error_number, 0);
            ASSERT_EQ(y.n_bytes, x.n_bytes) << offset << " " << length;
            ASSERT_EQ(x.n_bytes, std::min<uint64_t>(length, bytes.size() - offset));
            EXPECT_EQ(std::memcmp(a.get(), b.get(), 1 << 20), 0)
                << "offset " << offset << " length " << length << " shift " << shift;
            EXPECT_EQ(std::memcmp(b.get() + shift, bytes.data() + offset, y.n_bytes), 0);
        }
    }
}

TEST(FileRecordReader, MissingFileIsNotFound) {
    TempDir dir;
    try {
        FileRecordReader reader(dir.file("absent.bin"), DirectIo::Auto);
        FAIL();
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::NotFound);
        EXPECT_NE(std::string(e.what()).find("absent.bin"), std::string::npos);
    }
}

}  // namespace
}  // namespace cherenkov::engine
