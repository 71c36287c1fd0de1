// Elementwise and normalization primitives of docs/qwen4_exp.md §3.0, in float32. Norm weights
// are the multiplier actually applied (the store folds zero-centred 1+w), so every RMS norm here
// is x / sqrt(mean(x²) + eps) · w.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace cherenkov::engine {

inline float sigmoid(float x) {
    return 1.0F / (1.0F + std::exp(-x));
}
inline float silu(float x) {
    return x / (1.0F + std::exp(-x));
}
// PyTorch's softplus returns x above 20.
inline float softplus(float x) {
    return x > 20.0F ? x : std::log1p(std::exp(x));
}

// y = x / rms(x) · w over n values (in place allowed). w may be null (no scale).
void rms_norm(const float* x, const float* w, int64_t n, float eps, float* y);
// Grouped: each of the n / group groups gets its own statistic; w spans all n.
void grouped_rms_norm(const float* x, const float* w, int64_t n, int64_t group, float eps,
                      float* y);
// x / sqrt(Σx² + 1e-6) (the GDN q/k normalization; eps inside the sum).
void l2_normalize(float* x, int64_t n);
// Softmax in place over n values.
void softmax(float* x, int64_t n);

// Rotary tables for the text-only case (§1.5): inv_freq computed in float32, angle p·inv_freq
// rounded to float32, cos and sin duplicated over the two halves of Dr.
class Rope {
public:
    Rope(double theta, int64_t rotary_dim);
    int64_t rotary_dim() const { return rotary_dim_; }
    // Rotates the first Dr dims of a head vector x (NeoX rotate_half) at position p.
    void apply(float* x, int64_t position) const;

private:
    int64_t rotary_dim_;
    std::vector<float> inv_freq_;
};

}  // namespace cherenkov::engine
