// The inference state of one sequence (docs/qwen4_exp.md §5): per-layer caches and recurrent
// states, the n-gram context, the committed token history and the position; the MTP head's own
// caches (§6.4); and per-row snapshots of the non-truncatable states taken while verifying
// drafts, so commit(n) can roll back to the last accepted row (§5.2). A SequenceState is a plain
// value: copying it is a checkpoint (prefix caching, §5.3).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "model_data/qwen4_exp/config.h"

namespace cherenkov::engine {

struct GatedDeltaNetState {
    std::vector<float> conv;       // [Kc-1, conv_dim]: the last pre-conv inputs, oldest first
    std::vector<float> recurrent;  // [Hv, dk, dv]
};

struct PleState {
    std::vector<float> conv;  // [(Kp-1)·N, C·H]: the last normalized gated values, oldest first
};

// QSA caches: token-major rows, so truncation is a length change.
struct AttentionCache {
    int64_t length = 0;             // valid tokens
    std::vector<float> keys;        // [T, nKV, D] after k_norm and RoPE
    std::vector<float> values;      // [T, nKV, D]
    std::vector<float> index_keys;  // [T, dI] raw (no norm, no RoPE)
    std::vector<float> block_keys;  // [blocks, dI]: kB_b of completed blocks
    int64_t n_block_keys = 0;       // valid rows of block_keys
    int64_t kv_width = 0;           // nKV·D
    int64_t index_width = 0;        // dI (0 without an indexer)

    // Drops every entry at or after `n` (and block keys of blocks ending past it).
    void truncate(int64_t n, int64_t compress_ratio);
};

struct LayerState {
    GatedDeltaNetState gdn;    // GDN layers
    PleState ple;              // PLE layers
    AttentionCache attention;  // QSA layers (and MTP layers)
};

// The states a rollback restores, as they were after one verified row.
struct RowSnapshot {
    std::vector<GatedDeltaNetState> gdn;  // per trunk layer (empty vectors on QSA layers)
    std::vector<PleState> ple;            // per trunk layer (empty on non-PLE layers)
};

// Caches a backend keeps outside the host vectors below (the CUDA backend's device memory).
// clone() makes an independent copy, so a SequenceState stays a value: copying one copies these.
class BackendState {
public:
    virtual ~BackendState() = default;
    virtual std::unique_ptr<BackendState> clone() const = 0;
    virtual uint64_t bytes() const = 0;

    // Parking (engine/generate/sequence_switcher.h): the server's worker runs many sequences on
    // one set of backend caches, and a suspended sequence keeps a host copy of its caches.
    // save() writes what the caches hold (attention rows only up to their valid length) to
    // `out`, replacing its contents; restore() puts bytes save() wrote back, into a state made by
    // the same model for the same capacity (throws Corrupt for bytes of another shape); reset()
    // makes the caches those of a fresh sequence. Snapshots of a verification call are not
    // kept: a sequence is parked between steps, after commit().
    virtual void save(std::vector<std::byte>& out) const = 0;
    virtual void restore(std::span<const std::byte> saved) = 0;
    virtual void reset() = 0;
};

// Owns a BackendState with value semantics (copy = clone).
class BackendStateHandle {
public:
    BackendStateHandle() = default;
    explicit BackendStateHandle(std::unique_ptr<BackendState> state) : state_(std::move(state)) {}
    BackendStateHandle(const BackendStateHandle& other)
        : state_(other.state_ ? other.state_->clone() : nullptr) {}
    BackendStateHandle& operator=(const BackendStateHandle& other) {
        if (this != &other) state_ = other.state_ ? other.state_->clone() : nullptr;
        return *this;
    }
    BackendStateHandle(BackendStateHandle&&) noexcept = default;
    BackendStateHandle& operator=(BackendStateHandle&&) noexcept = default;
    ~BackendStateHandle() = default;

    BackendState* get() const { return state_.get(); }
    explicit operator bool() const { return state_ != nullptr; }

private:
    std::unique_ptr<BackendState> state_;
};

struct SequenceState {
    int64_t position = 0;                // tokens processed by the trunk
    std::vector<int32_t> tokens;         // the processed tokens, in order
    std::vector<int64_t> ngram_context;  // the last N-1 ids (EOS-padded); empty without PLE
    std::vector<LayerState> layers;      // per trunk layer

    // MTP (§6.4): own caches, valid length m, and the trunk residuals R_m..R_{position-1} that
    // forward calls with keep_residuals kept for the next catch-up: n_pending_residual_rows rows,
    // where the backend keeps them (the CPU in pending_residuals [rows, C·H]; CUDA on the device,
    // in `backend`).
    std::vector<LayerState> mtp_layers;
    int64_t mtp_length = 0;
    int64_t n_pending_residual_rows = 0;
    std::vector<float> pending_residuals;
    // R' of the last MTP call's last row [C·H], a chained draft's h (the CPU backend's; CUDA
    // keeps it on the device). Lives between the MTP calls of one step: checkpoints skip it.
    std::vector<float> mtp_chain_residual;

    // Filled by a forward call with snapshots on: one per row of that call (the CPU backend's;
    // other backends keep theirs in `backend`). n_snapshot_rows counts them for every backend.
    std::vector<RowSnapshot> row_snapshots;
    int64_t n_snapshot_rows = 0;
    int64_t snapshot_base = 0;  // position before that call

    // A backend's own caches (null for the CPU backend, whose caches are the vectors above).
    BackendStateHandle backend;

    // Bytes held by caches and states (memory_stats).
    uint64_t bytes() const;
};

// A fresh state for `config` (zeros, EOS context), with attention caches reserved for max_ctx.
SequenceState make_sequence_state(const model_data::qwen4_exp::Config& config, int64_t max_ctx,
                                  int64_t n_mtp_layers);

}  // namespace cherenkov::engine
