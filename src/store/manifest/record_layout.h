// Byte layout of one packed expert record in experts.bin (docs/store-format.md): the gate, up and
// down projections of one (layer, expert), each as MLX affine codes, then BF16 scales, then BF16
// biases. Every part starts on a 64-byte boundary inside the record and records start on
// 4096-byte boundaries, so a record can be read with O_DIRECT and used in place.
#pragma once

#include <cstdint>

namespace cherenkov::store {

inline constexpr uint64_t kRecordAlign = 4096;
inline constexpr uint64_t kPartAlign = 64;

struct ByteRange {
    uint64_t offset = 0;
    uint64_t n_bytes = 0;
    uint64_t end() const { return offset + n_bytes; }
    bool operator==(const ByteRange&) const = default;
};

// One projection [rows, cols] inside a record; offsets are relative to the record start.
struct ProjectionLayout {
    uint64_t rows = 0;
    uint64_t cols = 0;
    ByteRange codes;
    ByteRange scales;  // BF16 [rows, cols / group_size]
    ByteRange biases;  // BF16 [rows, cols / group_size]
    bool operator==(const ProjectionLayout&) const = default;
};

// The expert table: record index = layer * n_experts + expert, where layers [0, n_trunk_layers)
// are trunk layers and [n_trunk_layers, n_layers) the MTP layers in order.
struct ExpertLayout {
    int bits = 4;
    int group_size = 64;
    uint64_t hidden = 0;        // H
    uint64_t intermediate = 0;  // I
    int64_t n_trunk_layers = 0;
    int64_t n_mtp_layers = 0;
    int64_t n_experts = 0;
    uint64_t record_bytes = 0;  // a multiple of kRecordAlign
    ProjectionLayout gate;      // [I, H]
    ProjectionLayout up;        // [I, H]
    ProjectionLayout down;      // [H, I]

    int64_t n_layers() const { return n_trunk_layers + n_mtp_layers; }
    uint64_t n_records() const { return static_cast<uint64_t>(n_layers() * n_experts); }
    uint64_t file_bytes() const { return n_records() * record_bytes; }
    uint64_t record_index(int64_t layer, int64_t expert) const {
        return static_cast<uint64_t>(layer * n_experts + expert);
    }
    uint64_t record_offset(int64_t layer, int64_t expert) const {
        return record_index(layer, expert) * record_bytes;
    }
    bool operator==(const ExpertLayout&) const = default;
};

inline uint64_t align_up(uint64_t value, uint64_t alignment) {
    return (value + alignment - 1) / alignment * alignment;
}

// Bytes of one affine-quantized matrix part.
uint64_t affine_code_bytes(uint64_t rows, uint64_t cols, int bits);
uint64_t affine_scale_bytes(uint64_t rows, uint64_t cols, int group_size);  // BF16

// Computes the record layout. Throws InvalidInput when H or I is not a multiple of the group
// size or bits is not one of 2, 3, 4, 8.
ExpertLayout make_expert_layout(uint64_t hidden, uint64_t intermediate, int bits, int group_size,
                                int64_t n_trunk_layers, int64_t n_mtp_layers, int64_t n_experts);

}  // namespace cherenkov::store
