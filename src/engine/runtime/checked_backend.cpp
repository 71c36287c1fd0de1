#include "engine/runtime/checked_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

// The primary backend's own state and the reference's shadow state of one sequence.
class CheckedState final : public BackendState {
public:
    BackendStateHandle primary;
    SequenceState reference;

    std::unique_ptr<BackendState> clone() const override {
        return std::make_unique<CheckedState>(*this);
    }
    uint64_t bytes() const override {
        return (primary ? primary.get()->bytes() : 0) + reference.bytes();
    }
};

struct Divergence {
    double max_abs = 0.0;  // largest |primary − reference| over the logits
    double max_ref = 0.0;  // largest |reference| (scale)
    int64_t rows = 0;
    int64_t argmax_equal = 0;
};

Divergence compare(const std::vector<float>& a, const std::vector<float>& b, int64_t vocab) {
    Divergence d;
    if (a.size() != b.size()) throw_internal("--check: the backends returned different row counts");
    d.rows = vocab > 0 ? static_cast<int64_t>(a.size()) / vocab : 0;
    for (size_t i = 0; i < a.size(); ++i) {
        d.max_abs = std::max(d.max_abs, static_cast<double>(std::fabs(a[i] - b[i])));
        d.max_ref = std::max(d.max_ref, static_cast<double>(std::fabs(b[i])));
    }
    for (int64_t r = 0; r < d.rows; ++r) {
        const auto row_a = a.begin() + r * vocab;
        const auto row_b = b.begin() + r * vocab;
        if (std::max_element(row_a, row_a + vocab) - row_a ==
            std::max_element(row_b, row_b + vocab) - row_b)
            ++d.argmax_equal;
    }
    return d;
}

CheckedState& checked(SequenceState& state) {
    auto* c = dynamic_cast<CheckedState*>(state.backend.get());
    if (c == nullptr) throw_internal("--check was given a state made by another backend");
    return *c;
}

SequenceState& shadow(SequenceState& state) {
    return checked(state).reference;
}

// Runs `call` with the primary's own backend state in place, then puts the wrapper back.
template <typename Call>
auto on_primary(SequenceState& state, Call&& call) {
    CheckedState& c = checked(state);
    BackendStateHandle wrapper = std::move(state.backend);
    state.backend = std::move(c.primary);
    struct Restore {
        SequenceState& state;
        CheckedState& c;
        BackendStateHandle& wrapper;
        ~Restore() {
            c.primary = std::move(state.backend);
            state.backend = std::move(wrapper);
        }
    } restore{state, c, wrapper};
    return call(state);
}

class CheckedBackend final : public ModelBackend {
public:
    CheckedBackend(ModelBackend& primary, ModelBackend& reference)
        : primary_(primary), reference_(reference) {}

    const char* name() const override { return primary_.name(); }
    const model_data::qwen4_exp::Config& config() const override { return primary_.config(); }
    bool has_mtp() const override { return primary_.has_mtp(); }

    SequenceState new_sequence(int64_t max_ctx) const override {
        SequenceState state = primary_.new_sequence(max_ctx);
        auto checked = std::make_unique<CheckedState>();
        checked->primary = std::move(state.backend);
        checked->reference = reference_.new_sequence(max_ctx);
        state.backend = BackendStateHandle(std::move(checked));
        return state;
    }

    void set_routing_trace(std::ostream* out) override { primary_.set_routing_trace(out); }

    ForwardResult forward(SequenceState& state, std::span<const int32_t> tokens,
                          const ForwardOptions& options) override {
        ForwardResult result = on_primary(
            state, [&](SequenceState& s) { return primary_.forward(s, tokens, options); });
        ForwardOptions quiet = options;
        quiet.trace = nullptr;
        const ForwardResult reference = reference_.forward(shadow(state), tokens, quiet);
        report("forward", compare(result.logits, reference.logits, vocab_size()));
        return result;
    }

    void commit(SequenceState& state, int64_t n_rows) override {
        on_primary(state, [&](SequenceState& s) {
            primary_.commit(s, n_rows);
            return 0;
        });
        reference_.commit(shadow(state), n_rows);
    }

    MtpResult mtp_catch_up(SequenceState& state, int32_t next_token, bool all_logits,
                           ForwardTrace* trace) override {
        MtpResult result = on_primary(state, [&](SequenceState& s) {
            return primary_.mtp_catch_up(s, next_token, all_logits, trace);
        });
        const MtpResult reference = reference_.mtp_catch_up(shadow(state), next_token, all_logits);
        report("mtp", compare(result.logits, reference.logits, vocab_size()));
        return result;
    }

    MtpResult mtp_chain(SequenceState& state, std::span<const float> previous_residual,
                        int32_t token, int64_t position, int64_t step) override {
        MtpResult result = on_primary(state, [&](SequenceState& s) {
            return primary_.mtp_chain(s, previous_residual, token, position, step);
        });
        const MtpResult reference =
            reference_.mtp_chain(shadow(state), previous_residual, token, position, step);
        report("mtp-chain", compare(result.logits, reference.logits, vocab_size()));
        return result;
    }

    nlohmann::json backend_stats() const override {
        nlohmann::json stats = primary_.backend_stats();
        if (stats.is_null()) stats = nlohmann::json::object();
        stats["check"] = {{"calls", calls_},
                          {"rows", rows_},
                          {"argmax_equal", argmax_equal_},
                          {"max_abs_logit_diff", worst_}};
        return stats;
    }

private:
    void report(const char* what, const Divergence& d) {
        ++calls_;
        rows_ += d.rows;
        argmax_equal_ += d.argmax_equal;
        worst_ = std::max(worst_, d.max_abs);
        std::fprintf(stderr,
                     "check: %s %lld rows: max |logit diff| %.3g (max |logit| %.3g), argmax "
                     "equal %lld/%lld\n",
                     what, static_cast<long long>(d.rows), d.max_abs, d.max_ref,
                     static_cast<long long>(d.argmax_equal), static_cast<long long>(d.rows));
    }

    ModelBackend& primary_;
    ModelBackend& reference_;
    int64_t calls_ = 0;
    int64_t rows_ = 0;
    int64_t argmax_equal_ = 0;
    double worst_ = 0.0;
};

}  // namespace

std::unique_ptr<ModelBackend> make_checked_backend(ModelBackend& primary, ModelBackend& reference) {
    return std::make_unique<CheckedBackend>(primary, reference);
}

}  // namespace cherenkov::engine
