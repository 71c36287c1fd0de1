// A ModelBackend that forwards every call to another one: tests derive from it and override the
// calls they watch or change (counting what crosses back, limiting rows per call).
#pragma once

#include <cstdint>
#include <ostream>
#include <span>

#include "engine/model/model_backend.h"

namespace cherenkov::testing {

class DelegatingBackend : public engine::ModelBackend {
public:
    explicit DelegatingBackend(engine::ModelBackend& inner) : inner_(inner) {}

    const char* name() const override { return inner_.name(); }
    const model_data::qwen4_exp::Config& config() const override { return inner_.config(); }
    bool has_mtp() const override { return inner_.has_mtp(); }
    engine::SequenceState new_sequence(int64_t max_ctx) const override {
        return inner_.new_sequence(max_ctx);
    }
    void set_routing_trace(std::ostream* out) override { inner_.set_routing_trace(out); }
    engine::ForwardResult forward(engine::SequenceState& state, std::span<const int32_t> tokens,
                                  const engine::ForwardOptions& options) override {
        return inner_.forward(state, tokens, options);
    }
    void commit(engine::SequenceState& state, int64_t n_rows) override {
        inner_.commit(state, n_rows);
    }
    engine::MtpResult mtp_catch_up(engine::SequenceState& state, int32_t next_token,
                                   bool all_logits, engine::ForwardTrace* trace,
                                   const engine::TokenSelection* select) override {
        return inner_.mtp_catch_up(state, next_token, all_logits, trace, select);
    }
    engine::MtpResult mtp_chain(engine::SequenceState& state, int32_t token, int64_t position,
                                int64_t step, const engine::TokenSelection* select) override {
        return inner_.mtp_chain(state, token, position, step, select);
    }
    int64_t max_rows_per_call() const override { return inner_.max_rows_per_call(); }

protected:
    engine::ModelBackend& inner_;
};

}  // namespace cherenkov::testing
