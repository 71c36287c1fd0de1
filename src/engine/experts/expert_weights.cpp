#include "engine/experts/expert_source.h"

namespace cherenkov::engine {
namespace {

AffineMatrix projection_view(const std::byte* record, const store::ProjectionLayout& part,
                             const store::ExpertLayout& layout) {
    AffineMatrix m;
    m.rows = static_cast<int64_t>(part.rows);
    m.cols = static_cast<int64_t>(part.cols);
    m.bits = layout.bits;
    m.group_size = layout.group_size;
    m.codes = reinterpret_cast<const uint8_t*>(record + part.codes.offset);
    m.scales = reinterpret_cast<const uint16_t*>(record + part.scales.offset);
    m.biases = reinterpret_cast<const uint16_t*>(record + part.biases.offset);
    return m;
}

}  // namespace

ExpertWeights expert_weights_in_record(const std::byte* record, const store::ExpertLayout& layout) {
    ExpertWeights w;
    w.gate = projection_view(record, layout.gate, layout);
    w.up = projection_view(record, layout.up, layout);
    w.down = projection_view(record, layout.down, layout);
    w.bits = layout.bits;
    return w;
}

}  // namespace cherenkov::engine
