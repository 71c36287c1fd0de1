// Test helpers for the expert cache: small synthetic expert tables whose records encode
// (layer, expert, bits) so delivered bytes can be checked, and a record reader whose reads the
// test can hold, fail or cut short.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "engine/experts/expert_cache_options.h"
#include "engine/experts/expert_source.h"
#include "engine/experts/record_reader.h"
#include "store/manifest/record_layout.h"
#include "support/temp_dir.h"

namespace cherenkov::engine::testing {

// The 64-bit word at `word` of record (layer, expert) in the Q`bits` table.
inline uint64_t pattern_word(int64_t layer, int64_t expert, int bits, uint64_t word) {
    uint64_t z = static_cast<uint64_t>(layer) * 0x100000001B3ULL ^
                 static_cast<uint64_t>(expert) * 0x9E3779B97F4A7C15ULL ^
                 static_cast<uint64_t>(bits) << 56 ^ word * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 31)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 29);
}

// Writes a table of n_layers × n_experts records (H = I = hidden) to dir/name.
inline ExpertTable write_test_table(const cherenkov::testing::TempDir& dir, const std::string& name,
                                    int bits, int64_t n_layers, int64_t n_experts,
                                    uint64_t hidden = 64) {
    ExpertTable table;
    table.path = dir.file(name);
    table.layout = store::make_expert_layout(hidden, hidden, bits, 64, n_layers, 0, n_experts);
    std::ofstream out(table.path, std::ios::binary);
    std::vector<uint64_t> record(table.layout.record_bytes / 8);
    for (int64_t layer = 0; layer < n_layers; ++layer) {
        for (int64_t expert = 0; expert < n_experts; ++expert) {
            for (uint64_t word = 0; word < record.size(); ++word) {
                record[word] = pattern_word(layer, expert, bits, word);
            }
            out.write(reinterpret_cast<const char*>(record.data()),
                      static_cast<std::streamsize>(table.layout.record_bytes));
        }
    }
    return table;
}

// The record a delivered expert's views point into (the gate codes start the record).
inline const std::byte* record_of(const ExpertWeights& weights) {
    return reinterpret_cast<const std::byte*>(weights.gate.codes);
}

inline bool record_matches(const std::byte* record, const store::ExpertLayout& layout,
                           int64_t layer, int64_t expert, int bits) {
    for (uint64_t word = 0; word < layout.record_bytes / 8; ++word) {
        uint64_t value = 0;
        std::memcpy(&value, record + word * 8, 8);
        if (value != pattern_word(layer, expert, bits, word)) return false;
    }
    return true;
}

// Shared between a test and the readers the cache opens through test_reader_factory.
struct ReaderControl {
    std::mutex mutex;
    std::condition_variable changed;
    bool hold = false;               // reads wait while true unless their offset is released
    std::set<uint64_t> released;     // offsets allowed through while holding
    std::map<uint64_t, int> errors;  // offset → errno to fail with
    std::map<uint64_t, uint64_t> short_reads;  // offset → bytes to return
    std::vector<uint64_t> started;             // offsets in the order reads started
    int waiting = 0;                           // reads blocked by hold

    void release(uint64_t offset) {
        {
            std::lock_guard lock(mutex);
            released.insert(offset);
        }
        changed.notify_all();
    }
    void release_all() {
        {
            std::lock_guard lock(mutex);
            hold = false;
        }
        changed.notify_all();
    }
    // Blocks until n reads are waiting on the hold.
    void wait_for_waiting(int n) {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return waiting >= n; });
    }
    std::vector<uint64_t> started_offsets() {
        std::lock_guard lock(mutex);
        return started;
    }
};

class TestReader final : public RecordReader {
public:
    TestReader(const std::string& path, DirectIo mode, ReaderControl& control)
        : inner_(path, mode), control_(control) {}

    RecordRead read(std::span<std::byte> out, uint64_t offset) override {
        {
            std::unique_lock lock(control_.mutex);
            control_.started.push_back(offset);
            ++control_.waiting;
            control_.changed.notify_all();
            control_.changed.wait(
                lock, [&] { return !control_.hold || control_.released.count(offset) != 0; });
            --control_.waiting;
            if (const auto error = control_.errors.find(offset); error != control_.errors.end()) {
                return RecordRead{0, error->second};
            }
            if (const auto cut = control_.short_reads.find(offset);
                cut != control_.short_reads.end()) {
                RecordRead partial = inner_.read(out.first(cut->second), offset);
                return partial;
            }
        }
        return inner_.read(out, offset);
    }
    uint64_t size_bytes() const override { return inner_.size_bytes(); }
    const std::string& path() const override { return inner_.path(); }
    bool direct() const override { return inner_.direct(); }

private:
    FileRecordReader inner_;
    ReaderControl& control_;
};

inline RecordReaderFactory test_reader_factory(ReaderControl& control) {
    return [&control](const std::string& path, DirectIo mode) -> std::unique_ptr<RecordReader> {
        return std::make_unique<TestReader>(path, mode, control);
    };
}

}  // namespace cherenkov::engine::testing
