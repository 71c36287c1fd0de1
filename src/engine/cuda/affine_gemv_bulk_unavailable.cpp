// The bulk-copy GEMV entry points in builds without nvcc: nothing is taken, calls throw.
#include "base/error.h"
#include "engine/cuda/affine_gemv_bulk.h"

namespace cherenkov::engine::cuda {

bool bulk_gemv_takes(int, int, int64_t, int64_t, int) {
    return false;
}

int bulk_gemv_column_slices(int, int, int64_t, int64_t, int) {
    return 0;
}

bool bulk_experts_take(const ExpertShape&, int) {
    return false;
}

void bulk_gemv_dense(const DeviceAffineMatrix&, const float*, size_t, int, float*, size_t, void*,
                     float) {
    throw_unsupported("[bulk_gemv_dense] built without CUDA");
}

void bulk_experts_gate_up(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                          void*, const int*) {
    throw_unsupported("[bulk_experts_gate_up] built without CUDA");
}

void bulk_experts_down(const ExpertShape&, const ExpertAddress*, int, const float*, int, float*,
                       void*, const int*) {
    throw_unsupported("[bulk_experts_down] built without CUDA");
}

}  // namespace cherenkov::engine::cuda
