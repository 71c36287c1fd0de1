// A ModelBackend that "generates" a fixed script: whatever the prompt, the token chosen at
// generated index g is script[g] (then EOS). It keeps the prompt length in its own BackendState,
// which parks and restores like the CUDA backend's, so the worker's switching and the prefix
// cache's checkpoints run over it (every prefill call, which asks for one logit row, sets the
// prompt length to the position it reaches; decode calls ask for every row). The
// serving tests drive the whole path from HTTP to the text pipeline through it, with output the
// tiny trained model would never write (tool-call markup).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "base/error.h"
#include "engine/model/model_backend.h"

namespace cherenkov::testing {

class ScriptedBackend : public engine::ModelBackend {
public:
    ScriptedBackend(std::vector<int32_t> script, int32_t eos, int64_t vocab)
        : script_(std::move(script)), eos_(eos) {
        config_.vocab_size = vocab;
        config_.eos_token_ids = {eos};
    }

    const char* name() const override { return "scripted"; }
    const model_data::qwen4_exp::Config& config() const override { return config_; }
    bool has_mtp() const override { return false; }

    engine::SequenceState new_sequence(int64_t /*max_ctx*/) const override {
        engine::SequenceState s;
        s.backend = engine::BackendStateHandle(std::make_unique<State>());
        return s;
    }
    void set_routing_trace(std::ostream* /*out*/) override {}

    engine::ForwardResult forward(engine::SequenceState& state, std::span<const int32_t> tokens,
                                  const engine::ForwardOptions& options) override {
        auto* s = dynamic_cast<State*>(state.backend.get());
        CHERENKOV_ASSERT(s != nullptr, "a scripted state");
        const int64_t first = state.position;
        state.position += static_cast<int64_t>(tokens.size());
        state.tokens.insert(state.tokens.end(), tokens.begin(), tokens.end());
        if (!options.all_logits) {
            s->prompt_length = state.position;
            last_prompt = state.tokens;
        }
        ++forward_calls;
        prefilled_tokens += options.all_logits ? 0 : static_cast<int64_t>(tokens.size());
        if (delay.count() > 0) std::this_thread::sleep_for(delay);
        const int64_t n = options.all_logits ? static_cast<int64_t>(tokens.size()) : 1;
        const int64_t first_row = options.all_logits ? first : state.position - 1;
        engine::ForwardResult result;
        result.n_logit_rows = n;
        for (int64_t r = 0; r < n; ++r) {
            const int64_t generated = first_row + r + 1 - s->prompt_length;
            const int32_t token = generated >= 0 && generated < static_cast<int64_t>(script_.size())
                                      ? script_[static_cast<size_t>(generated)]
                                      : eos_;
            if (options.select != nullptr) result.tokens.push_back(token);
            if (options.select == nullptr || options.select->keep_logits) {
                std::vector<float> row(static_cast<size_t>(config_.vocab_size), 0.0F);
                row[static_cast<size_t>(token)] = 10.0F;
                result.logits.insert(result.logits.end(), row.begin(), row.end());
            }
        }
        return result;
    }
    void commit(engine::SequenceState& /*state*/, int64_t /*n_rows*/) override {}
    engine::MtpResult mtp_catch_up(engine::SequenceState&, int32_t, bool, engine::ForwardTrace*,
                                   const engine::TokenSelection*) override {
        throw_unsupported("the scripted backend has no MTP head");
    }
    engine::MtpResult mtp_chain(engine::SequenceState&, int32_t, int64_t, int64_t,
                                const engine::TokenSelection*) override {
        throw_unsupported("the scripted backend has no MTP head");
    }

    int64_t forward_calls = 0;
    int64_t prefilled_tokens = 0;        // prompt tokens run (not restored from a checkpoint)
    std::vector<int32_t> last_prompt;    // the whole prompt of the last prefill call
    std::chrono::milliseconds delay{0};  // per forward call: lets tests catch a request running

private:
    struct State final : engine::BackendState {
        int64_t prompt_length = -1;
        std::unique_ptr<engine::BackendState> clone() const override {
            return std::make_unique<State>(*this);
        }
        uint64_t bytes() const override { return sizeof(*this); }
        void save(std::vector<std::byte>& out) const override {
            out.resize(sizeof prompt_length);
            std::memcpy(out.data(), &prompt_length, sizeof prompt_length);
        }
        void restore(std::span<const std::byte> saved) override {
            if (saved.size() != sizeof prompt_length) throw_corrupt("scripted state size");
            std::memcpy(&prompt_length, saved.data(), sizeof prompt_length);
        }
        void reset() override { prompt_length = -1; }
    };

    model_data::qwen4_exp::Config config_;
    std::vector<int32_t> script_;
    int32_t eos_;
};

}  // namespace cherenkov::testing
