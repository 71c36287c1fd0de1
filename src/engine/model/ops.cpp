#include "engine/model/ops.h"

#include <algorithm>

namespace cherenkov::engine {

void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y) {
    float sum = 0.0F;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
    const float inv = 1.0F / std::sqrt(sum / static_cast<float>(n) + eps);
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * (w != nullptr ? w[i] : 1.0F);
}

void grouped_rms_norm(const float* x, const float* w, int64_t n, int64_t group, float eps,
                      float* y) {
    for (int64_t g = 0; g < n; g += group) {
        rms_norm(x + g, w != nullptr ? w + g : nullptr, group, eps, y + g);
    }
}

void l2_normalize(float* x, int64_t n) {
    float sum = 0.0F;
    for (int64_t i = 0; i < n; ++i) sum += x[i] * x[i];
    const float inv = 1.0F / std::sqrt(sum + 1e-6F);
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

void softmax(float* x, int64_t n) {
    float max = x[0];
    for (int64_t i = 1; i < n; ++i) max = std::max(max, x[i]);
    float sum = 0.0F;
    for (int64_t i = 0; i < n; ++i) {
        x[i] = std::exp(x[i] - max);
        sum += x[i];
    }
    const float inv = 1.0F / sum;
    for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

Rope::Rope(double theta, int64_t rotary_dim) : rotary_dim_(rotary_dim) {
    const float base = static_cast<float>(theta);
    for (int64_t i = 0; i < rotary_dim / 2; ++i) {
        const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
        inv_freq_.push_back(1.0F / std::pow(base, exponent));
    }
}

void Rope::apply(float* x, int64_t position) const {
    const int64_t half = rotary_dim_ / 2;
    const float p = static_cast<float>(position);
    for (int64_t i = 0; i < half; ++i) {
        const float angle = p * inv_freq_[static_cast<size_t>(i)];
        const float c = std::cos(angle);
        const float s = std::sin(angle);
        const float a = x[i];
        const float b = x[i + half];
        x[i] = a * c - b * s;
        x[i + half] = b * c + a * s;
    }
}

}  // namespace cherenkov::engine
