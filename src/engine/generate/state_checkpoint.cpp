#include "engine/generate/state_checkpoint.h"

#include <algorithm>
#include <string>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

template <typename T>
uint64_t vector_bytes(const std::vector<T>& v) {
    return v.capacity() * sizeof(T);
}

// A copy whose capacity is its size (checkpoints keep only what is valid).
template <typename T>
std::vector<T> compact(const std::vector<T>& v) {
    return std::vector<T>(v.begin(), v.end());
}

LayerState compact_layer(const LayerState& s) {
    LayerState out;
    out.gdn.conv = compact(s.gdn.conv);
    out.gdn.recurrent = compact(s.gdn.recurrent);
    out.ple.conv = compact(s.ple.conv);
    const AttentionCache& a = s.attention;
    AttentionCache& b = out.attention;
    b.length = a.length;
    b.n_block_keys = a.n_block_keys;
    b.kv_width = a.kv_width;
    b.index_width = a.index_width;
    // Rows past the valid length can be left by a rollback; they are not part of the state.
    const auto rows = [](const std::vector<float>& v, int64_t n, int64_t width) {
        const auto count = std::min(v.size(), static_cast<size_t>(n * width));
        return std::vector<float>(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(count));
    };
    b.keys = rows(a.keys, a.length, a.kv_width);
    b.values = rows(a.values, a.length, a.kv_width);
    b.index_keys = rows(a.index_keys, a.length, a.index_width);
    b.block_keys = rows(a.block_keys, a.n_block_keys, a.index_width);
    return out;
}

void check_shape(bool ok, const std::string& what) {
    if (!ok) throw_corrupt("a state checkpoint does not fit this sequence: " + what);
}

void restore_layer(const LayerState& from, LayerState& to) {
    check_shape(from.gdn.conv.size() == to.gdn.conv.size() &&
                    from.gdn.recurrent.size() == to.gdn.recurrent.size() &&
                    from.ple.conv.size() == to.ple.conv.size() &&
                    from.attention.kv_width == to.attention.kv_width &&
                    from.attention.index_width == to.attention.index_width,
                "layer shapes differ");
    // assign() keeps the target's reserved capacity (attention caches reserved for its context).
    to.gdn.conv.assign(from.gdn.conv.begin(), from.gdn.conv.end());
    to.gdn.recurrent.assign(from.gdn.recurrent.begin(), from.gdn.recurrent.end());
    to.ple.conv.assign(from.ple.conv.begin(), from.ple.conv.end());
    const AttentionCache& a = from.attention;
    AttentionCache& b = to.attention;
    b.length = a.length;
    b.n_block_keys = a.n_block_keys;
    b.keys.assign(a.keys.begin(), a.keys.end());
    b.values.assign(a.values.begin(), a.values.end());
    b.index_keys.assign(a.index_keys.begin(), a.index_keys.end());
    b.block_keys.assign(a.block_keys.begin(), a.block_keys.end());
}

}  // namespace

uint64_t StateCheckpoint::bytes() const {
    return host.bytes() + vector_bytes(host.ngram_context) + vector_bytes(device) +
           sizeof(StateCheckpoint);
}

StateCheckpoint save_checkpoint(const SequenceState& state) {
    StateCheckpoint c;
    SequenceState& h = c.host;
    h.position = state.position;
    h.tokens = compact(state.tokens);
    h.ngram_context = compact(state.ngram_context);
    h.layers.reserve(state.layers.size());
    for (const LayerState& l : state.layers) h.layers.push_back(compact_layer(l));
    h.mtp_layers.reserve(state.mtp_layers.size());
    for (const LayerState& l : state.mtp_layers) h.mtp_layers.push_back(compact_layer(l));
    h.mtp_length = state.mtp_length;
    h.n_pending_residual_rows = state.n_pending_residual_rows;
    h.pending_residuals = compact(state.pending_residuals);
    if (state.backend) state.backend.get()->save(c.device);
    c.device.shrink_to_fit();
    return c;
}

void restore_checkpoint(const StateCheckpoint& checkpoint, SequenceState& target) {
    const SequenceState& h = checkpoint.host;
    check_shape(h.layers.size() == target.layers.size() &&
                    h.mtp_layers.size() == target.mtp_layers.size() &&
                    h.ngram_context.size() == target.ngram_context.size(),
                "layer counts differ");
    check_shape(checkpoint.device.empty() != static_cast<bool>(target.backend),
                checkpoint.device.empty() ? "the target keeps device caches, the checkpoint none"
                                          : "the checkpoint has device caches, the target none");
    for (size_t l = 0; l < h.layers.size(); ++l) restore_layer(h.layers[l], target.layers[l]);
    for (size_t l = 0; l < h.mtp_layers.size(); ++l)
        restore_layer(h.mtp_layers[l], target.mtp_layers[l]);
    if (target.backend) target.backend.get()->restore(checkpoint.device);
    target.position = h.position;
    target.tokens.assign(h.tokens.begin(), h.tokens.end());
    target.ngram_context.assign(h.ngram_context.begin(), h.ngram_context.end());
    target.mtp_length = h.mtp_length;
    target.n_pending_residual_rows = h.n_pending_residual_rows;
    target.pending_residuals.assign(h.pending_residuals.begin(), h.pending_residuals.end());
    target.row_snapshots.clear();
    target.n_snapshot_rows = 0;
    target.snapshot_base = h.position;
}

bool mtp_state_complete(const SequenceState& state, const model_data::qwen4_exp::Config& config) {
    if (state.position == 0) return state.mtp_length == 0 && state.n_pending_residual_rows == 0;
    if (state.mtp_length < 0 || state.mtp_length >= state.position) return false;
    // The CPU backend keeps the rows in pending_residuals; others keep them in `backend`.
    const int64_t rows = state.position - state.mtp_length;
    return state.n_pending_residual_rows == rows &&
           (state.backend ||
            static_cast<int64_t>(state.pending_residuals.size()) == rows * config.hc_width());
}

}  // namespace cherenkov::engine
