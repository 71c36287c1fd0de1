#include "store/manifest/record_layout.h"

#include <string>

#include "base/error.h"

namespace cherenkov::store {

namespace {

ProjectionLayout place_projection(uint64_t rows, uint64_t cols, int bits, int group_size,
                                  uint64_t& cursor) {
    ProjectionLayout projection;
    projection.rows = rows;
    projection.cols = cols;
    projection.codes = {cursor, affine_code_bytes(rows, cols, bits)};
    cursor = align_up(projection.codes.end(), kPartAlign);
    projection.scales = {cursor, affine_scale_bytes(rows, cols, group_size)};
    cursor = align_up(projection.scales.end(), kPartAlign);
    projection.biases = {cursor, affine_scale_bytes(rows, cols, group_size)};
    cursor = align_up(projection.biases.end(), kPartAlign);
    return projection;
}

}  // namespace

uint64_t affine_code_bytes(uint64_t rows, uint64_t cols, int bits) {
    return rows * cols * static_cast<uint64_t>(bits) / 8;
}

uint64_t affine_scale_bytes(uint64_t rows, uint64_t cols, int group_size) {
    return rows * (cols / static_cast<uint64_t>(group_size)) * 2;
}

ExpertLayout make_expert_layout(uint64_t hidden, uint64_t intermediate, int bits, int group_size,
                                int64_t n_trunk_layers, int64_t n_mtp_layers, int64_t n_experts) {
    if (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
        throw_invalid("expert records: unsupported bit width " + std::to_string(bits));
    }
    if (group_size != 32 && group_size != 64 && group_size != 128) {
        throw_invalid("expert records: unsupported group size " + std::to_string(group_size));
    }
    const auto group = static_cast<uint64_t>(group_size);
    if (hidden == 0 || intermediate == 0 || hidden % group != 0 || intermediate % group != 0) {
        throw_invalid("expert records: hidden " + std::to_string(hidden) + " and intermediate " +
                      std::to_string(intermediate) + " must be non-zero multiples of group size " +
                      std::to_string(group_size));
    }
    if (n_trunk_layers < 0 || n_mtp_layers < 0 || n_experts <= 0) {
        throw_invalid("expert records: bad layer or expert count");
    }
    ExpertLayout layout;
    layout.bits = bits;
    layout.group_size = group_size;
    layout.hidden = hidden;
    layout.intermediate = intermediate;
    layout.n_trunk_layers = n_trunk_layers;
    layout.n_mtp_layers = n_mtp_layers;
    layout.n_experts = n_experts;
    uint64_t cursor = 0;
    layout.gate = place_projection(intermediate, hidden, bits, group_size, cursor);
    layout.up = place_projection(intermediate, hidden, bits, group_size, cursor);
    layout.down = place_projection(hidden, intermediate, bits, group_size, cursor);
    layout.record_bytes = align_up(cursor, kRecordAlign);
    return layout;
}

}  // namespace cherenkov::store
