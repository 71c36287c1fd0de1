#include <gtest/gtest.h>

#include <filesystem>

#include "base/atomic_file.h"
#include "base/error.h"
#include "base/file.h"
#include "base/half.h"
#include "base/log.h"
#include "support/temp_dir.h"

namespace cherenkov {
namespace {

using cherenkov::testing::TempDir;

TEST(Error, WithContextKeepsKindAndReadsOuterToInner) {
    Error inner(ErrorKind::Corrupt, "tensor 'x' ends at byte 9");
    Error outer = inner.with_context("model.safetensors");
    EXPECT_EQ(outer.kind(), ErrorKind::Corrupt);
    EXPECT_STREQ(outer.what(), "model.safetensors: tensor 'x' ends at byte 9");
    EXPECT_EQ(error_kind_name(ErrorKind::NotFound), "not found");
}

TEST(Error, ErrnoMapsMissingFilesToNotFound) {
    try {
        open_read_only("/nonexistent/cherenkov/file");
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::NotFound);
        EXPECT_NE(std::string(error.what()).find("/nonexistent/cherenkov/file"), std::string::npos);
    }
}

TEST(File, PreadExactReportsShortFilesWithPathAndOffset) {
    TempDir dir;
    std::string path = dir.write("short.bin", "abcdef");
    UniqueFd fd = open_read_only(path);
    std::vector<std::byte> out(4);
    pread_exact(fd.get(), out, 2, path);
    EXPECT_EQ(static_cast<char>(out[0]), 'c');
    try {
        pread_exact(fd.get(), out, 4, path);
        FAIL();
    } catch (const Error& error) {
        EXPECT_EQ(error.kind(), ErrorKind::Corrupt);
        EXPECT_NE(std::string(error.what()).find("short.bin"), std::string::npos);
        EXPECT_NE(std::string(error.what()).find("byte 6"), std::string::npos);
    }
    EXPECT_THROW(open_read_only(dir.path().string()), Error);
}

TEST(MappedFile, ViewStaysValidWhileHeld) {
    TempDir dir;
    std::string path = dir.write("m.bin", "mapped bytes");
    std::shared_ptr<const MappedFile> mapping = MappedFile::open(path);
    std::filesystem::remove(path);  // the mapping keeps the pages
    ASSERT_EQ(mapping->bytes().size(), 12u);
    EXPECT_EQ(static_cast<char>(mapping->bytes()[7]), 'b');
    EXPECT_EQ(MappedFile::open(dir.write("empty.bin", ""))->bytes().size(), 0u);
}

TEST(AtomicFile, ReplacesContentsAndLeavesNoTemporaries) {
    TempDir dir;
    std::string path = dir.file("index.json");
    write_file_atomically(path, "first");
    write_file_atomically(path, "second version");
    EXPECT_EQ(read_text_file(path), "second version");
    size_t n_entries = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path())) ++n_entries;
    EXPECT_EQ(n_entries, 1u);
    EXPECT_THROW(write_file_atomically(dir.file("missing/dir/x"), "x"), Error);
}

TEST(Half, Bf16RoundsToNearestEven) {
    EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
    EXPECT_EQ(float_to_bf16(-0.134375f), 0xbe0a);  // docs/formats.md §2.6 example A
    EXPECT_EQ(bf16_to_float(0x3fac), 1.34375f);
    // 1 + 2^-8 is halfway between two bf16 values; ties go to the even mantissa (1.0).
    EXPECT_EQ(float_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80);
    EXPECT_EQ(float_to_bf16(1.0f + 3.0f / 256.0f), 0x3f82);
    EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::nanf("")))));
}

TEST(Half, F16DecodesNormalsSubnormalsAndSpecials) {
    EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
    EXPECT_EQ(f16_to_float(0xc000), -2.0f);
    EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
    EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
    EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
    EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
}

TEST(Log, ParsesLevelsAndRejectsOthers) {
    EXPECT_EQ(parse_log_level("debug"), LogLevel::Debug);
    EXPECT_THROW(parse_log_level("loud"), Error);
}

}  // namespace
}  // namespace cherenkov
