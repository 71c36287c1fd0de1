#include "engine/experts/record_reader.h"

#include <gtest/gtest.h>

#include <cstdlib>
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
