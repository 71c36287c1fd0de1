// QSA attention on the GPU (docs/qwen4_exp.md §3.6), mirroring engine/model/sparse_attention.cpp
// step for step in float32: indexer queries and block keys, q/k/v with norm and RoPE appended to
// the device cache, top-K block selection per row (radix select, ties to the smaller block), and
// split-K online-softmax attention combined in a fixed order, so results are reproducible.
// Kernels wait for the previous kernel before touching memory and are launched with
// launch_dependent (dependent_launch.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cuda/cuda_check.cuh"
#include "engine/cuda/dependent_launch.cuh"
#include "engine/cuda/device_layers.cuh"
#include "engine/cuda/device_math.cuh"

namespace cherenkov::engine::cuda {

namespace {

constexpr int kNormThreads = 128;         // one CTA per head vector (D or dI ≤ a few hundred)
constexpr int kScoreThreads = 256;        // 8 warps, one block key per warp at a time
constexpr int kBlocksPerScoreCta = 64;    // block keys scored by one CTA
constexpr int64_t kScoreCtaGranule = 32;  // score grids are multiples of this many CTAs
constexpr int kSelectThreads = 512;       // one CTA per query row
constexpr int kAttentionWarps = 4;        // warps of one attention CTA, one token each at a time
constexpr int kAttentionThreads = kAttentionWarps * 32;
constexpr int kMaxHeadDim = 512;  // D ≤ this: a lane holds D / 32 values in registers
constexpr int kPerLane = kMaxHeadDim / 32;
// Query heads of one key/value head per CTA of the grouped (prefill) attention, and the bytes of
// its key/value tile.
constexpr int kMaxGroupedHeads = 4;
constexpr size_t kGroupedTileBytes = 40 << 10;
// Split-K chunk of the selected tokens: 16 per warp, so a decode call's chain of tokens per warp
// stays short (256 left each warp 64 tokens in a row).
constexpr int64_t kTokensPerSplit = 64;
// Bound on (row, head, split) CTAs of one call: prefill has parallelism from its rows, so it
// gets fewer splits and the partial buffer stays small; decode (1-4 rows) gets up to
// ceil(selected / kTokensPerSplit) splits.
constexpr int64_t kMaxSplitCtas = 4096;
constexpr int64_t kMaxGridRows = 65535;  // rows go on grid.y / grid.z

// The token set of one query row (select_tokens in the CPU file): every token 0..p when there is
// no indexer or at most `top` complete blocks; else the `top` selected blocks (ascending ids in
// `selected`) followed by the incomplete tail [n_blocks·r, p].
struct RowTokens {
    bool dense = true;
    int64_t n_blocks = 0;
    int64_t count = 0;
};

__host__ __device__ inline RowTokens row_tokens(bool has_indexer, int64_t position, int64_t r,
                                                int64_t top) {
    RowTokens row;
    row.n_blocks = has_indexer ? (position + 1) / r : 0;
    row.dense = !has_indexer || row.n_blocks <= top;
    row.count = row.dense ? position + 1 : top * r + (position + 1 - row.n_blocks * r);
    return row;
}

// The i-th token (i < row.count) of a row; `selected` holds the row's `top` block ids.
__device__ inline int64_t row_token(const RowTokens& row, int64_t i, const int* selected, int64_t r,
                                    int64_t top) {
    if (row.dense) return i;
    if (i < top * r) return static_cast<int64_t>(selected[i / r]) * r + i % r;
    return row.n_blocks * r + (i - top * r);
}

// y = RoPE_position(x / rms(x) · w) over one head vector of n values, rotating the first
// rotary_dim dims (engine::rms_norm then Rope::apply). Called by all threads of the CTA; x and y
// may be the same array (thread e reads only e and its rotation partner before writing them).
__device__ void norm_rope_head(const float* x, const float* w, int n, int rotary_dim,
                               const float* inv_freq, int64_t position, float eps, float* y,
                               float* reduce) {
    float sum = 0.0F;
    for (int e = threadIdx.x; e < n; e += blockDim.x) sum += x[e] * x[e];
    sum = block_sum(sum, reduce);
    const float inv = 1.0F / sqrtf(sum / static_cast<float>(n) + eps);
    const int half = rotary_dim / 2;
    for (int e = threadIdx.x; e < n; e += blockDim.x) {
        if (e < half) {
            const float a = x[e] * inv * (w != nullptr ? w[e] : 1.0F);
            const float b = x[e + half] * inv * (w != nullptr ? w[e + half] : 1.0F);
            const float2 rotated = rope_pair(a, b, inv_freq[e], position);
            y[e] = rotated.x;
            y[e + half] = rotated.y;
        } else if (e >= rotary_dim) {
            y[e] = x[e] * inv * (w != nullptr ? w[e] : 1.0F);
        }
    }
}

// Head vectors of T rows: head h of row t lies at x + t·x_row_stride + h·x_head_stride (likewise
// y) and is rotated at position *position + t. grid (T, n_heads), kNormThreads threads.
__global__ void head_norm_rope_kernel(const float* x, int64_t x_row_stride, int64_t x_head_stride,
                                      float* y, int64_t y_row_stride, int64_t y_head_stride,
                                      const float* w, int n, int rotary_dim, const float* inv_freq,
                                      const int64_t* position, float eps) {
    __shared__ float reduce[32];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t t = blockIdx.x;
    const int64_t h = blockIdx.y;
    norm_rope_head(x + t * x_row_stride + h * x_head_stride, w, n, rotary_dim, inv_freq,
                   *position + t, eps, y + t * y_row_stride + h * y_head_stride, reduce);
}

// Appends the call's keys and values to the cache at rows *position + t: key head h of row t
// (new_keys [T, kv_width]) normalized with k_norm and rotated at its position, the value head
// copied. grid (T, n_kv), kNormThreads threads. The position comes from the device, so a
// captured step writes where the sequence is when it is replayed.
__global__ void append_keys_values_kernel(const float* new_keys, const float* new_values,
                                          int64_t kv_width, int head_dim, const float* k_norm,
                                          int rotary_dim, const float* inv_freq,
                                          const int64_t* position, float eps, float* keys,
                                          float* values) {
    __shared__ float reduce[32];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t t = blockIdx.x;
    const int64_t at = (*position + t) * kv_width + static_cast<int64_t>(blockIdx.y) * head_dim;
    const int64_t from = t * kv_width + static_cast<int64_t>(blockIdx.y) * head_dim;
    norm_rope_head(new_keys + from, k_norm, head_dim, rotary_dim, inv_freq, *position + t, eps,
                   keys + at, reduce);
    for (int e = threadIdx.x; e < head_dim; e += blockDim.x) values[at + e] = new_values[from + e];
}

// Appends the call's raw index keys (row t at new_keys + t·new_stride) to the cache at rows
// *position + t, and makes kB_b for every block b that the call completes: b = *position / r +
// blockIdx.x while b < (*position + T) / r. kB_b is the mean of the block's r raw keys, normalized
// with index_k_norm and rotated at position b·r; a block's keys at or past *position are read from
// new_keys (the append of another CTA may not have landed). grid ceil(T / r), which covers the
// most blocks T rows can complete; dynamic shared memory di floats.
__global__ void append_index_keys_kernel(const float* new_keys, int64_t new_stride, int64_t n_rows,
                                         const int64_t* position, int64_t r, int di, const float* w,
                                         int rotary_dim, const float* inv_freq, float eps,
                                         float* index_keys, float* block_keys) {
    extern __shared__ float pooled[];
    __shared__ float reduce[32];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t first = *position;
    for (int64_t t = blockIdx.x; t < n_rows; t += gridDim.x) {
        for (int e = threadIdx.x; e < di; e += blockDim.x)
            index_keys[(first + t) * di + e] = new_keys[t * new_stride + e];
    }
    const int64_t b = first / r + blockIdx.x;
    if (b >= (first + n_rows) / r) return;  // the same for the whole CTA
    for (int e = threadIdx.x; e < di; e += blockDim.x) {
        float sum = 0.0F;
        for (int64_t j = b * r; j < (b + 1) * r; ++j) {
            sum += j < first ? index_keys[j * di + e] : new_keys[(j - first) * new_stride + e];
        }
        pooled[e] = sum / static_cast<float>(r);
    }
    __syncthreads();
    norm_rope_head(pooled, w, di, rotary_dim, inv_freq, b * r, eps, block_keys + b * di, reduce);
}

// scores[t, b] = Σ_h relu(q[t, h]·kB_b) / sqrt(di) for b < n_blocks(t), rows with more than `top`
// complete blocks only. queries: [T, n_index_heads, di]; scores: [T, scores_stride].
// grid (ceil(max_blocks / kBlocksPerScoreCta), T), kScoreThreads threads, dynamic shared memory
// n_index_heads·di floats.
__global__ void block_scores_kernel(const float* queries, const float* block_keys,
                                    int n_index_heads, int di, const int64_t* position, int64_t r,
                                    int64_t top, float* scores, int64_t scores_stride) {
    extern __shared__ float q[];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t t = blockIdx.y;
    const RowTokens row = row_tokens(true, *position + t, r, top);
    if (row.dense) return;  // the same for the whole CTA
    const int width = n_index_heads * di;
    for (int e = threadIdx.x; e < width; e += blockDim.x) q[e] = queries[t * width + e];
    __syncthreads();
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int n_warps = blockDim.x >> 5;
    const float scale = 1.0F / sqrtf(static_cast<float>(di));
    const int64_t begin = static_cast<int64_t>(blockIdx.x) * kBlocksPerScoreCta;
    const int64_t end = min(row.n_blocks, begin + kBlocksPerScoreCta);
    for (int64_t b = begin + warp; b < end; b += n_warps) {
        const float* kb = block_keys + b * di;
        float sum = 0.0F;
        for (int h = 0; h < n_index_heads; ++h) {
            float dot = 0.0F;
            for (int e = lane; e < di; e += 32) dot += q[h * di + e] * kb[e];
            sum += fmaxf(warp_sum(dot), 0.0F);
        }
        if (lane == 0) scores[t * scores_stride + b] = sum * scale;
    }
}

// A key whose order is the selection order: larger score first, on an exact tie the smaller
// block index (the CPU's comparator). The high half maps the float to an unsigned value with
// the same order (-0 counted as +0, since -0 == +0 on the CPU); the low half is ~b.
__device__ inline uint64_t selection_key(float score, int64_t b) {
    uint32_t bits = __float_as_uint(score);
    if ((bits & 0x7FFFFFFFU) == 0) bits = 0;  // -0 → +0
    bits = (bits & 0x80000000U) != 0 ? ~bits : (bits | 0x80000000U);
    return (static_cast<uint64_t>(bits) << 32) |
           static_cast<uint64_t>(0xFFFFFFFFU - static_cast<uint32_t>(b));
}

// The `top` blocks of each sparse row (ascending ids into selected [T, top]). Keys are distinct,
// so the `top` largest are exactly those ≥ the top-th largest key, which an 8-pass radix select
// (8 bits a pass, from the high byte) finds; an ordered ballot compaction writes them in block
// order. Linear in n_blocks. grid T, kSelectThreads threads.
__global__ void select_blocks_kernel(const float* scores, int64_t scores_stride,
                                     const int64_t* position, int64_t r, int64_t top,
                                     int* selected) {
    __shared__ unsigned int histogram[256];
    __shared__ uint64_t shared_prefix;
    __shared__ int64_t shared_remaining;
    __shared__ int warp_counts[32];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t t = blockIdx.x;
    const RowTokens row = row_tokens(true, *position + t, r, top);
    if (row.dense) return;
    const float* row_scores = scores + t * scores_stride;

    uint64_t prefix = 0;      // the high bits found so far of the top-th largest key
    uint64_t mask = 0;        // which bits those are
    int64_t remaining = top;  // its rank among the keys that match the prefix
    for (int shift = 56; shift >= 0; shift -= 8) {
        for (int d = threadIdx.x; d < 256; d += blockDim.x) histogram[d] = 0;
        __syncthreads();
        for (int64_t b = threadIdx.x; b < row.n_blocks; b += blockDim.x) {
            const uint64_t key = selection_key(row_scores[b], b);
            if ((key & mask) == prefix) atomicAdd(&histogram[(key >> shift) & 0xFF], 1U);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            int64_t above = 0;  // matching keys with a larger digit
            int digit = 255;
            while (digit > 0 && above + histogram[digit] < remaining) above += histogram[digit--];
            shared_prefix = prefix | (static_cast<uint64_t>(digit) << shift);
            shared_remaining = remaining - above;
        }
        __syncthreads();
        prefix = shared_prefix;
        remaining = shared_remaining;
        mask |= uint64_t{0xFF} << shift;
    }
    const uint64_t threshold = prefix;

    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int n_warps = blockDim.x >> 5;
    int* out = selected + t * top;
    int64_t base = 0;
    for (int64_t start = 0; start < row.n_blocks; start += blockDim.x) {
        const int64_t b = start + threadIdx.x;
        const bool take = b < row.n_blocks && selection_key(row_scores[b], b) >= threshold;
        const unsigned int ballot = __ballot_sync(0xFFFFFFFFU, take);
        if (lane == 0) warp_counts[warp] = __popc(ballot);
        __syncthreads();
        int64_t offset = base;
        int64_t total = 0;
        for (int w = 0; w < n_warps; ++w) {
            if (w < warp) offset += warp_counts[w];
            total += warp_counts[w];
        }
        offset += __popc(ballot & ((1U << lane) - 1U));
        if (take && offset < top) out[offset] = static_cast<int>(b);
        base += total;
        __syncthreads();  // warp_counts is rewritten by the next chunk
    }
}

struct AttentionParams {
    const float* qg;          // [T, n_heads, 2·D]: query (normed, rotated), then gate
    const float* keys;        // cache [tokens, kv_width]
    const float* values;      // cache [tokens, kv_width]
    const int* selected;      // [T, top] or null
    float* partial_out;       // [T, n_heads, n_splits, D]: Σ exp(s − m)·v of one split
    float* partial_stats;     // [T, n_heads, n_splits, 2]: (m, Σ exp(s − m))
    const int64_t* position;  // device: the first row's position
    int64_t kv_width;
    int64_t r;
    int64_t top;
    int n_heads;
    int head_dim;
    int group;  // n_heads / n_kv
    int n_splits;
    float scale;  // 1 / sqrt(D)
    bool has_indexer;
};

// Lane `lane`'s dims of the key and value of the row's i-th token (zeros when i ≥ end).
__device__ __forceinline__ void load_key_value(const AttentionParams& p, const RowTokens& row,
                                               const int* selected, int64_t i, int64_t end,
                                               int64_t kv_offset, int lane, float (&k)[kPerLane],
                                               float (&v)[kPerLane]) {
    const bool valid = i < end;
    const int64_t token = valid ? row_token(row, i, selected, p.r, p.top) : 0;
    const float* kr = p.keys + token * p.kv_width + kv_offset;
    const float* vr = p.values + token * p.kv_width + kv_offset;
#pragma unroll
    for (int c = 0; c < kPerLane; ++c) {
        const int e = lane + 32 * c;
        const bool load = valid && e < p.head_dim;
        k[c] = load ? kr[e] : 0.0F;
        v[c] = load ? vr[e] : 0.0F;
    }
}

// Split `split`'s share [begin, end) of row t's tokens (both attention kernels).
struct SplitTokens {
    RowTokens row;
    const int* selected;  // the row's `top` block ids, or null
    int64_t begin;
    int64_t end;
};
__device__ __forceinline__ SplitTokens split_tokens(const AttentionParams& p, int64_t t,
                                                    int split) {
    SplitTokens s;
    s.row = row_tokens(p.has_indexer, *p.position + t, p.r, p.top);
    s.selected = p.selected != nullptr ? p.selected + t * p.top : nullptr;
    const int64_t chunk = (s.row.count + p.n_splits - 1) / p.n_splits;
    s.begin = min(s.row.count, static_cast<int64_t>(split) * chunk);
    s.end = min(s.row.count, s.begin + chunk);
    return s;
}

// The lane's dims of row t's query for `head` (zeros past D), and a zeroed accumulator.
template <int PL>
__device__ __forceinline__ void load_query(const AttentionParams& p, int64_t t, int head, int lane,
                                           float (&q_reg)[PL], float (&acc)[PL]) {
    const float* q = p.qg + (t * p.n_heads + head) * 2 * p.head_dim;
#pragma unroll
    for (int c = 0; c < PL; ++c) {
        const int e = lane + 32 * c;
        q_reg[c] = e < p.head_dim ? q[e] : 0.0F;
        acc[c] = 0.0F;
    }
}

// s = (q·k over the lane's dims below d, summed over the warp) · scale.
template <int PL>
__device__ __forceinline__ float scaled_score(const float (&q)[PL], const float (&k)[PL], int lane,
                                              int d, float scale) {
    float dot = 0.0F;
#pragma unroll
    for (int c = 0; c < PL; ++c) {
        if (lane + 32 * c < d) dot = fmaf(q[c], k[c], dot);
    }
    return warp_sum(dot) * scale;
}

// The warp's online softmax (m, l, acc) after one more token of score s and value v. Both
// attention kernels take their tokens through this, in the same order, so they give the same bits.
template <int PL>
__device__ __forceinline__ void online_step(float s, const float (&v)[PL], int lane, int d,
                                            float& m, float& l, float (&acc)[PL]) {
    const float m_new = fmaxf(m, s);
    const float correction = expf(m - m_new);  // 0 for the first token (m = -inf)
    const float weight = expf(s - m_new);
    l = fmaf(l, correction, weight);
#pragma unroll
    for (int c = 0; c < PL; ++c) {
        if (lane + 32 * c < d) acc[c] = fmaf(weight, v[c], acc[c] * correction);
    }
    m = m_new;
}

// A warp's final (m, l) and accumulator [d] into the CTA's shared arrays for the merge.
template <int PL>
__device__ __forceinline__ void store_warp_state(float m, float l, const float (&acc)[PL], int lane,
                                                 int d, float* max_slot, float* sum_slot,
                                                 float* out) {
    if (lane == 0) {
        *max_slot = m;
        *sum_slot = l;
    }
#pragma unroll
    for (int c = 0; c < PL; ++c) {
        const int e = lane + 32 * c;
        if (e < d) out[e] = acc[c];
    }
}

// One head's kAttentionWarps warp states merged in warp order into the split's partial output
// [d] and stats (m, l), by `threads` threads of which this is `thread`. warp_out: [warps, d].
__device__ __forceinline__ void merge_warp_states(const float* warp_max, const float* warp_sums,
                                                  const float* warp_out, int d, int thread,
                                                  int threads, float* out, float* stats) {
    float m_all = -INFINITY;
    for (int w = 0; w < kAttentionWarps; ++w) m_all = fmaxf(m_all, warp_max[w]);
    const bool empty = m_all == -INFINITY;  // no tokens in this split
    for (int e = thread; e < d; e += threads) {
        float sum = 0.0F;
        for (int w = 0; w < kAttentionWarps && !empty; ++w) {
            sum += warp_out[w * d + e] * expf(warp_max[w] - m_all);
        }
        out[e] = sum;
    }
    if (thread == 0) {
        float l_all = 0.0F;
        for (int w = 0; w < kAttentionWarps && !empty; ++w) {
            l_all += warp_sums[w] * expf(warp_max[w] - m_all);
        }
        stats[0] = m_all;
        stats[1] = l_all;
    }
}

// Online softmax over one split of a row's tokens for one head: warp w takes tokens
// begin + w, begin + w + kAttentionWarps, …; lane holds dims lane + 32·c. The warps' states are
// merged in warp order. grid (n_splits, n_heads, T), kAttentionThreads threads. Decode calls.
__global__ void attention_split_kernel(AttentionParams p) {
    __shared__ float warp_max_s[kAttentionWarps];
    __shared__ float warp_sum_s[kAttentionWarps];
    __shared__ float warp_out[kAttentionWarps * kMaxHeadDim];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int split = blockIdx.x;
    const int head = blockIdx.y;
    const int64_t t = blockIdx.z;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int d = p.head_dim;
    const SplitTokens span = split_tokens(p, t, split);
    const RowTokens& row = span.row;
    const int* selected = span.selected;
    const int64_t begin = span.begin;
    const int64_t end = span.end;
    const int64_t kv_offset = static_cast<int64_t>(head / p.group) * d;

    float q_reg[kPerLane];
    float acc[kPerLane];
    load_query(p, t, head, lane, q_reg, acc);
    // The next token's key and value are loaded while this one is reduced: a warp's tokens are a
    // chain, and loading each token's key, then its value, after the previous token's sums cost
    // two memory round trips per token (~19 µs per decode call at 64 tokens per warp).
    float k_cur[kPerLane];
    float v_cur[kPerLane];
    load_key_value(p, row, selected, begin + warp, end, kv_offset, lane, k_cur, v_cur);
    float m = -INFINITY;
    float l = 0.0F;
    for (int64_t i = begin + warp; i < end; i += kAttentionWarps) {
        float k_next[kPerLane];
        float v_next[kPerLane];
        load_key_value(p, row, selected, i + kAttentionWarps, end, kv_offset, lane, k_next, v_next);
        online_step(scaled_score(q_reg, k_cur, lane, d, p.scale), v_cur, lane, d, m, l, acc);
#pragma unroll
        for (int c = 0; c < kPerLane; ++c) {
            k_cur[c] = k_next[c];
            v_cur[c] = v_next[c];
        }
    }
    store_warp_state(m, l, acc, lane, d, warp_max_s + warp, warp_sum_s + warp,
                     warp_out + static_cast<size_t>(warp) * d);
    __syncthreads();
    const int64_t slot = (t * p.n_heads + head) * p.n_splits + split;
    merge_warp_states(warp_max_s, warp_sum_s, warp_out, d, static_cast<int>(threadIdx.x),
                      static_cast<int>(blockDim.x), p.partial_out + slot * d,
                      p.partial_stats + slot * 2);
}

// attention_split_kernel for several query heads of one key/value head at once (prefill calls):
// a row's heads attend the same tokens (the selection is per row), so the CTA stages each tile
// of keys and values in shared memory once for `heads` heads instead of every head reading them
// from L2 (the per-head form read 4 MB a row and head at 2,048 tokens, and the QSA layer's
// attention took 7.4 of a 512-row call's 23.5 ms at 4,096 tokens). Warp (h, w) runs head
// first + h's warp w of attention_split_kernel: the same tokens in the same order, the same
// steps and merge, so the same bits. grid (n_splits, n_kv · group / heads, T), heads ·
// kAttentionThreads threads; dynamic shared memory tile_tokens · 2 · D floats (≥ heads ·
// kAttentionWarps · D: the warps' outputs reuse it).
template <int PL>
__global__ void __launch_bounds__(kMaxGroupedHeads* kAttentionThreads)
    attention_split_grouped_kernel(AttentionParams p, int heads, int tile_tokens) {
    extern __shared__ float tile[];  // [tile_tokens][key D | value D]
    __shared__ float warp_max_s[kMaxGroupedHeads * kAttentionWarps];
    __shared__ float warp_sum_s[kMaxGroupedHeads * kAttentionWarps];
    wait_for_previous_kernel();
    allow_next_kernel();
    const int split = blockIdx.x;
    const int head_ctas = p.group / heads;
    const int kv = static_cast<int>(blockIdx.y) / head_ctas;
    const int64_t t = blockIdx.z;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int n_warps = static_cast<int>(blockDim.x) >> 5;
    const int token_warp = warp % kAttentionWarps;
    const int h = warp / kAttentionWarps;
    const int head = kv * p.group + (static_cast<int>(blockIdx.y) % head_ctas) * heads + h;
    const int d = p.head_dim;
    const SplitTokens span = split_tokens(p, t, split);
    const RowTokens& row = span.row;
    const int* selected = span.selected;
    const int64_t begin = span.begin;
    const int64_t end = span.end;
    const int64_t kv_offset = static_cast<int64_t>(kv) * d;

    float q_reg[PL];
    float acc[PL];
    load_query(p, t, head, lane, q_reg, acc);
    float m = -INFINITY;
    float l = 0.0F;
    // tile_tokens is a multiple of kAttentionWarps, so warp w still takes the tokens ≡ begin + w.
    for (int64_t tile0 = begin; tile0 < end; tile0 += tile_tokens) {
        const int n = static_cast<int>(min(static_cast<int64_t>(tile_tokens), end - tile0));
        for (int j = warp; j < n; j += n_warps) {
            const int64_t token = row_token(row, tile0 + j, selected, p.r, p.top);
            const float* kr = p.keys + token * p.kv_width + kv_offset;
            const float* vr = p.values + token * p.kv_width + kv_offset;
            float* dst = tile + static_cast<size_t>(j) * 2 * d;
            for (int e = lane; e < d; e += 32) {
                dst[e] = kr[e];
                dst[d + e] = vr[e];
            }
        }
        __syncthreads();
        for (int j = token_warp; j < n; j += kAttentionWarps) {
            const float* kv_row = tile + static_cast<size_t>(j) * 2 * d;
            float k[PL];
            float v[PL];
#pragma unroll
            for (int c = 0; c < PL; ++c) {
                const int e = lane + 32 * c;
                k[c] = e < d ? kv_row[e] : 0.0F;
                v[c] = e < d ? kv_row[d + e] : 0.0F;
            }
            online_step(scaled_score(q_reg, k, lane, d, p.scale), v, lane, d, m, l, acc);
        }
        __syncthreads();  // the tile is rewritten next (or holds the warps' outputs)
    }
    float* warp_out = tile;  // [heads · kAttentionWarps, D]
    store_warp_state(m, l, acc, lane, d, warp_max_s + warp, warp_sum_s + warp,
                     warp_out + static_cast<size_t>(warp) * d);
    __syncthreads();
    const int64_t slot = (t * p.n_heads + head) * p.n_splits + split;
    const int first_warp = h * kAttentionWarps;
    merge_warp_states(warp_max_s + first_warp, warp_sum_s + first_warp,
                      warp_out + static_cast<size_t>(first_warp) * d, d,
                      static_cast<int>(threadIdx.x) % kAttentionThreads, kAttentionThreads,
                      p.partial_out + slot * d, p.partial_stats + slot * 2);
}

// gated[t, h·D + e] = (Σ_s o_s[e]·exp(m_s − M)) / (Σ_s l_s·exp(m_s − M)) · sigmoid(gate[e]),
// splits merged in split order. grid (T, n_heads), kAttentionThreads threads; dynamic shared
// memory 2·n_splits floats. The splits' maxima and scales are read and worked out once per
// block, by all threads together, and each output's loads over the splits are issued together:
// read in a loop per output with the scale recomputed per split, a decode call took ~12 µs.
__global__ void attention_combine_kernel(const float* partial_out, const float* partial_stats,
                                         const float* qg, int n_heads, int head_dim, int n_splits,
                                         float* gated) {
    extern __shared__ float split_shared[];
    float* split_max = split_shared;               // [n_splits]
    float* split_scale = split_shared + n_splits;  // [n_splits]: exp(m_s − M), 0 when empty
    __shared__ float reduce[32];
    __shared__ float inv_shared;
    wait_for_previous_kernel();
    allow_next_kernel();
    const int64_t t = blockIdx.x;
    const int head = blockIdx.y;
    const int d = head_dim;
    const int64_t first_slot = (t * n_heads + head) * n_splits;
    const float* stats = partial_stats + first_slot * 2;
    float m_local = -INFINITY;
    for (int s = threadIdx.x; s < n_splits; s += blockDim.x) {
        split_max[s] = stats[s * 2];
        m_local = fmaxf(m_local, split_max[s]);
    }
    const float m_all = block_max(m_local, reduce);
    for (int s = threadIdx.x; s < n_splits; s += blockDim.x) {
        split_scale[s] = split_max[s] != -INFINITY ? expf(split_max[s] - m_all) : 0.0F;
    }
    __syncthreads();
    if (threadIdx.x == 0) {  // in split order, as the outputs
        float l_all = 0.0F;
        for (int s = 0; s < n_splits; ++s) {
            if (split_max[s] != -INFINITY) l_all += stats[s * 2 + 1] * split_scale[s];
        }
        inv_shared = 1.0F / l_all;
    }
    __syncthreads();
    const float inv = inv_shared;
    const float* gate = qg + (t * n_heads + head) * 2 * d + d;
    for (int e = threadIdx.x; e < d; e += blockDim.x) {
        float out = 0.0F;
#pragma unroll 8
        for (int s = 0; s < n_splits; ++s) {
            const float v = partial_out[(first_slot + s) * d + e];
            if (split_max[s] != -INFINITY) out += v * split_scale[s];
        }
        gated[(t * n_heads + head) * d + e] = out * inv * sigmoid_f(gate[e]);
    }
}

// Normalizes and rotates n_heads head vectors of T rows (strides in floats), row t at position
// *ctx.position + t.
void head_norm_rope(const float* x, int64_t x_row_stride, int64_t x_head_stride, float* y,
                    int64_t y_row_stride, int64_t y_head_stride, const float* w, int64_t n_rows,
                    int64_t n_heads, int64_t n, const DeviceContext& ctx) {
    const dim3 grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(n_heads));
    launch_dependent(head_norm_rope_kernel, grid, dim3(kNormThreads), 0, ctx.stream, x,
                     x_row_stride, x_head_stride, y, y_row_stride, y_head_stride, w,
                     static_cast<int>(n), static_cast<int>(ctx.config->rotary_dim),
                     ctx.rope_inv_freq, ctx.position, ctx.eps());
}

// The host-side trace values (CPU: select_tokens' margin and selected blocks): copies the scores
// and selections back, so only a traced call synchronizes.
void record_selection_trace(const DeviceSparseAttentionWeights& weights, const float* scores,
                            int64_t scores_stride, const int* selected, int64_t n_rows,
                            int64_t first_position, const DeviceContext& ctx) {
    const auto& c = *ctx.config;
    const int64_t top = c.block_topk;
    std::vector<float> margins(static_cast<size_t>(n_rows), std::numeric_limits<float>::infinity());
    if (!weights.has_indexer) {
        ctx.record_host("qsa.margin", margins.data(), n_rows);
        return;
    }
    const int64_t r = c.indexer->compress_ratio;
    std::vector<float> host_scores(scores != nullptr ? static_cast<size_t>(n_rows * scores_stride)
                                                     : 0);
    std::vector<int> host_selected(selected != nullptr ? static_cast<size_t>(n_rows * top) : 0);
    if (!host_scores.empty()) {
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(host_scores.data(), scores,
                                             host_scores.size() * sizeof(float),
                                             cudaMemcpyDeviceToHost, ctx.stream));
    }
    if (!host_selected.empty()) {
        CHERENKOV_CUDA_CHECK(cudaMemcpyAsync(host_selected.data(), selected,
                                             host_selected.size() * sizeof(int),
                                             cudaMemcpyDeviceToHost, ctx.stream));
    }
    CHERENKOV_CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    std::vector<float> selections(static_cast<size_t>(n_rows * top), -1.0F);
    std::vector<int64_t> order;
    for (int64_t t = 0; t < n_rows; ++t) {
        const RowTokens row = row_tokens(true, first_position + t, r, top);
        float* out = selections.data() + t * top;
        if (row.dense) {
            for (int64_t b = 0; b < row.n_blocks; ++b) out[b] = static_cast<float>(b);
            continue;
        }
        const float* s = host_scores.data() + t * scores_stride;
        order.resize(static_cast<size_t>(row.n_blocks));
        std::iota(order.begin(), order.end(), 0);
        std::partial_sort(order.begin(), order.begin() + top + 1, order.end(),
                          [&](int64_t a, int64_t b) { return s[a] != s[b] ? s[a] > s[b] : a < b; });
        margins[static_cast<size_t>(t)] =
            s[order[static_cast<size_t>(top - 1)]] - s[order[static_cast<size_t>(top)]];
        for (int64_t i = 0; i < top; ++i) {
            out[i] = static_cast<float>(host_selected[static_cast<size_t>(t * top + i)]);
        }
    }
    ctx.record_host("qsa.margin", margins.data(), n_rows);
    ctx.record_host("qsa.selected_blocks", selections.data(), n_rows * top);
}

// Indexer queries [T, nI, dI]; the raw keys are appended to the cache with the block keys they
// complete (cache.length and n_block_keys advance).
void index_projections(const DeviceSparseAttentionWeights& weights, DeviceAttentionCache& cache,
                       const float* mix, int64_t n_rows, float* queries, const DeviceContext& ctx) {
    const auto& ix = *ctx.config->indexer;
    const int64_t di = ix.head_dim;
    const int64_t r = ix.compress_ratio;
    const int64_t qk_width = (ix.n_heads + 1) * di;
    DeviceScratch<float> qk(static_cast<size_t>(n_rows * qk_width), ctx.stream);
    linear_apply(weights.index_qk, mix, n_rows, qk.data(), ctx.stream);
    head_norm_rope(qk.data(), qk_width, di, queries, ix.n_heads * di, di, weights.index_q_norm,
                   n_rows, ix.n_heads, di, ctx);
    // Every block below cache.length has its key (truncate keeps that), so the kernel's first
    // block, *position / r, is the host's n_block_keys.
    CHERENKOV_ASSERT(cache.n_block_keys == cache.length / r, "block keys up to the cache length");
    launch_dependent(append_index_keys_kernel, dim3(static_cast<unsigned>((n_rows + r - 1) / r)),
                     dim3(kNormThreads), di * sizeof(float), ctx.stream,
                     qk.data() + ix.n_heads * di, qk_width, n_rows, ctx.position, r,
                     static_cast<int>(di), weights.index_k_norm,
                     static_cast<int>(ctx.config->rotary_dim), ctx.rope_inv_freq, ctx.eps(),
                     cache.index_keys, cache.block_keys);
}

void check_shapes(const DeviceSparseAttentionWeights& weights, const DeviceAttentionCache& cache,
                  int64_t n_rows, int64_t first_position, const DeviceContext& ctx) {
    const auto& c = *ctx.config;
    if (cache.length != first_position) {
        throw_internal("[qsa] attention cache holds " + std::to_string(cache.length) +
                       " tokens, the call starts at position " + std::to_string(first_position));
    }
    if (cache.length + n_rows > cache.capacity) {
        throw_internal("[qsa] " + std::to_string(n_rows) + " rows at position " +
                       std::to_string(first_position) + " exceed the cache's capacity of " +
                       std::to_string(cache.capacity) + " tokens");
    }
    CHERENKOV_ASSERT(n_rows >= 0 && n_rows <= kMaxGridRows, "rows of one call fit a grid axis");
    CHERENKOV_ASSERT(ctx.position != nullptr, "the call's position is on the device");
    CHERENKOV_ASSERT(c.head_dim <= kMaxHeadDim, "head_dim fits the attention kernel's registers");
    CHERENKOV_ASSERT(c.rotary_dim <= c.head_dim, "rotary dims lie within the head");
    CHERENKOV_ASSERT(c.num_attention_heads % c.num_key_value_heads == 0, "whole GQA groups");
    if (weights.has_indexer) {
        CHERENKOV_ASSERT(c.indexer.has_value(), "indexer weights come with indexer fields");
        CHERENKOV_ASSERT(c.rotary_dim <= c.indexer->head_dim, "rotary dims lie within dI");
        CHERENKOV_ASSERT(c.block_topk >= 1, "an indexer selects at least one block");
        CHERENKOV_ASSERT(c.indexer->n_heads * c.indexer->head_dim * sizeof(float) <= 48 * 1024,
                         "indexer queries fit shared memory");
    }
}

}  // namespace

namespace {

// Query heads per CTA of the grouped attention: the most, up to kMaxGroupedHeads, that divide
// the heads of a key/value head; 1 (the per-head kernel) when none does.
int grouped_heads(int group) {
    for (int heads = kMaxGroupedHeads; heads >= 2; --heads) {
        if (group % heads == 0) return heads;
    }
    return 1;
}

// The split attention of a call: decode rows per head (their splits give the parallelism and
// each head's keys are read by one CTA anyway), prefill rows grouped by key/value head.
void launch_attention_split(const AttentionParams& params, int64_t n_rows, int64_t n_kv,
                            cudaStream_t stream) {
    const int d = params.head_dim;
    const int heads = n_rows > kMaxGemvRows ? grouped_heads(params.group) : 1;
    // Tokens per tile: a multiple of kAttentionWarps within the tile's bytes, and room for the
    // warps' outputs after the loop (2 · tile_tokens ≥ heads · kAttentionWarps).
    const auto fit = static_cast<int>(kGroupedTileBytes / (2 * sizeof(float) * d));
    const int tile_tokens = std::min(16, fit / kAttentionWarps * kAttentionWarps);
    if (heads == 1 || 2 * tile_tokens < heads * kAttentionWarps) {
        const dim3 grid(static_cast<unsigned>(params.n_splits),
                        static_cast<unsigned>(params.n_heads), static_cast<unsigned>(n_rows));
        launch_dependent(attention_split_kernel, grid, dim3(kAttentionThreads), 0, stream,
                         params);
        return;
    }
    const dim3 grid(static_cast<unsigned>(params.n_splits),
                    static_cast<unsigned>(n_kv * (params.group / heads)),
                    static_cast<unsigned>(n_rows));
    const size_t shared = static_cast<size_t>(tile_tokens) * 2 * d * sizeof(float);
    const dim3 threads(static_cast<unsigned>(heads * kAttentionThreads));
    if (d <= 256) {
        launch_dependent(attention_split_grouped_kernel<8>, grid, threads, shared, stream, params,
                         heads, tile_tokens);
    } else {
        launch_dependent(attention_split_grouped_kernel<kPerLane>, grid, threads, shared, stream,
                         params, heads, tile_tokens);
    }
}

}  // namespace

QsaLaunchShape qsa_launch_shape(const model_data::qwen4_exp::Config& c, bool has_indexer,
                                int64_t first_position, int64_t n_rows) {
    const int64_t r = has_indexer ? c.indexer->compress_ratio : 0;
    const int64_t top = has_indexer ? c.block_topk : 0;
    QsaLaunchShape shape;
    int64_t max_tokens = 0;
    for (int64_t t = 0; t < n_rows; ++t) {
        const RowTokens row = row_tokens(has_indexer, first_position + t, r, top);
        max_tokens = std::max(max_tokens, row.count);
        shape.any_sparse = shape.any_sparse || !row.dense;
    }
    if (shape.any_sparse) {
        // Rounded up, so that the grid (and a captured step) changes every 2048 blocks, not every
        // 64; the extra CTAs find no blocks of their rows and return.
        const int64_t ctas =
            ((first_position + n_rows) / r + kBlocksPerScoreCta - 1) / kBlocksPerScoreCta;
        shape.score_ctas = (ctas + kScoreCtaGranule - 1) / kScoreCtaGranule * kScoreCtaGranule;
    }
    const int64_t split_cap =
        std::max<int64_t>(1, kMaxSplitCtas / std::max<int64_t>(1, n_rows * c.num_attention_heads));
    shape.n_splits =
        std::clamp<int64_t>((max_tokens + kTokensPerSplit - 1) / kTokensPerSplit, 1, split_cap);
    return shape;
}

void sparse_attention_forward(const DeviceSparseAttentionWeights& weights,
                              DeviceAttentionCache& cache, const float* mix, int64_t n_rows,
                              int64_t first_position, float* y, const DeviceContext& ctx) {
    check_shapes(weights, cache, n_rows, first_position, ctx);
    if (n_rows == 0) return;
    const auto& c = *ctx.config;
    const int64_t n_heads = c.num_attention_heads;
    const int64_t n_kv = c.num_key_value_heads;
    const int64_t d = c.head_dim;
    const int64_t kv_width = n_kv * d;
    const bool indexed = weights.has_indexer;
    const int64_t r = indexed ? c.indexer->compress_ratio : 0;
    const int64_t top = indexed ? c.block_topk : 0;
    const QsaLaunchShape shape = qsa_launch_shape(c, indexed, first_position, n_rows);

    // Indexer queries, raw keys and the block keys they complete.
    const int64_t index_width = indexed ? c.indexer->n_heads * c.indexer->head_dim : 0;
    DeviceScratch<float> index_queries(static_cast<size_t>(n_rows * index_width), ctx.stream);
    if (indexed) index_projections(weights, cache, mix, n_rows, index_queries.data(), ctx);

    // Queries (with gates), keys and values; k (normed, rotated) and v appended to the cache.
    DeviceScratch<float> qg(static_cast<size_t>(n_rows * n_heads * 2 * d), ctx.stream);
    DeviceScratch<float> new_keys(static_cast<size_t>(n_rows * kv_width), ctx.stream);
    DeviceScratch<float> new_values(static_cast<size_t>(n_rows * kv_width), ctx.stream);
    linear_apply(weights.q, mix, n_rows, qg.data(), ctx.stream);
    linear_apply(weights.k, mix, n_rows, new_keys.data(), ctx.stream);
    linear_apply(weights.v, mix, n_rows, new_values.data(), ctx.stream);
    head_norm_rope(qg.data(), n_heads * 2 * d, 2 * d, qg.data(), n_heads * 2 * d, 2 * d,
                   weights.q_norm, n_rows, n_heads, d, ctx);
    launch_dependent(append_keys_values_kernel,
                     dim3(static_cast<unsigned>(n_rows), static_cast<unsigned>(n_kv)),
                     dim3(kNormThreads), 0, ctx.stream, new_keys.data(), new_values.data(),
                     kv_width, static_cast<int>(d), weights.k_norm, static_cast<int>(c.rotary_dim),
                     ctx.rope_inv_freq, ctx.position, ctx.eps(), cache.keys, cache.values);
    sparse_attention_advance(cache, n_rows, r);

    // Block selection for the rows with more than `top` complete blocks.
    const int64_t scores_stride = shape.score_ctas * kBlocksPerScoreCta;
    DeviceScratch<float> scores(static_cast<size_t>(n_rows * scores_stride), ctx.stream);
    DeviceScratch<int> selected(shape.any_sparse ? static_cast<size_t>(n_rows * top) : 0,
                                ctx.stream);
    if (shape.any_sparse) {
        const auto& ix = *c.indexer;
        const dim3 score_grid(static_cast<unsigned>(shape.score_ctas),
                              static_cast<unsigned>(n_rows));
        launch_dependent(
            block_scores_kernel, score_grid, dim3(kScoreThreads), index_width * sizeof(float),
            ctx.stream, index_queries.data(), cache.block_keys, static_cast<int>(ix.n_heads),
            static_cast<int>(ix.head_dim), ctx.position, r, top, scores.data(), scores_stride);
        launch_dependent(select_blocks_kernel, dim3(static_cast<unsigned>(n_rows)),
                         dim3(kSelectThreads), 0, ctx.stream, scores.data(), scores_stride,
                         ctx.position, r, top, selected.data());
    }
    if (ctx.trace != nullptr) {
        record_selection_trace(weights, scores.data(), scores_stride, selected.data(), n_rows,
                               first_position, ctx);
    }

    // Split-K attention over each row's tokens, then the merge with the output gate.
    const int64_t n_splits = shape.n_splits;
    DeviceScratch<float> partial_out(static_cast<size_t>(n_rows * n_heads * n_splits * d),
                                     ctx.stream);
    DeviceScratch<float> partial_stats(static_cast<size_t>(n_rows * n_heads * n_splits * 2),
                                       ctx.stream);
    AttentionParams params{};
    params.qg = qg.data();
    params.keys = cache.keys;
    params.values = cache.values;
    params.selected = shape.any_sparse ? selected.data() : nullptr;
    params.partial_out = partial_out.data();
    params.partial_stats = partial_stats.data();
    params.position = ctx.position;
    params.kv_width = kv_width;
    params.r = r;
    params.top = top;
    params.n_heads = static_cast<int>(n_heads);
    params.head_dim = static_cast<int>(d);
    params.group = static_cast<int>(n_heads / n_kv);
    params.n_splits = static_cast<int>(n_splits);
    params.scale = 1.0F / std::sqrt(static_cast<float>(d));
    params.has_indexer = indexed;
    launch_attention_split(params, n_rows, n_kv, ctx.stream);
    DeviceScratch<float> gated(static_cast<size_t>(n_rows * n_heads * d), ctx.stream);
    const dim3 combine_grid(static_cast<unsigned>(n_rows), static_cast<unsigned>(n_heads));
    launch_dependent(attention_combine_kernel, combine_grid, dim3(kAttentionThreads),
                     2 * n_splits * sizeof(float), ctx.stream, partial_out.data(),
                     partial_stats.data(), qg.data(), params.n_heads, params.head_dim,
                     params.n_splits, gated.data());
    linear_apply(weights.o, gated.data(), n_rows, y, ctx.stream);
}

void sparse_attention_advance(DeviceAttentionCache& cache, int64_t n_rows, int64_t compress_ratio) {
    cache.length += n_rows;
    if (compress_ratio > 0) cache.n_block_keys = cache.length / compress_ratio;
}

}  // namespace cherenkov::engine::cuda
