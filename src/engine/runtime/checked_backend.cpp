#include "engine/runtime/checked_backend.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

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
    // The reference's shadow state lives in this object, so handing the caches to another
    // sequence would hand it the shadow too. --check is a CLI diagnostic; the server, the only
    // user of parking, does not take it.
    void save(std::vector<std::byte>& /*out*/) const override { refuse_parking(); }
    void restore(std::span<const std::byte> /*saved*/) override { refuse_parking(); }
    void reset() override { refuse_parking(); }

private:
    [[noreturn]] static void refuse_parking() {
        throw_unsupported("--check runs one sequence at a time; its states cannot be parked");
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

// The selection a call asks for, with the logits kept so both sides' logits can be compared
// (--check is a slow diagnostic: the logits cross to the host on every call).
std::optional<TokenSelection> with_logits(const TokenSelection* select) {
    if (select == nullptr) return std::nullopt;
    TokenSelection copy = *select;
    copy.keep_logits = true;
    return copy;
}

// Drops the logits the caller did not ask for, after they were compared.
template <typename Result>
void drop_unasked_logits(Result& result, const TokenSelection* select) {
    if (select != nullptr && !select->keep_logits) result.logits.clear();
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

// A call whose logits differ by more than this (docs/qwen4_exp.md §4.3's tolerance) is replayed
// with traces to find the first stage that diverges.
constexpr double kLogitTolerance = 1e-3;
// A traced stage diverges when its largest difference exceeds this fraction of its RMS.
constexpr double kStageTolerance = 1e-4;

// Forward order of a traced stage name ("embed", "layers.{l}.{stage}", "final_hidden").
std::pair<int64_t, int> stage_order(const std::string& name) {
    static const char* const kStages[] = {
        "ple.embedding",  "ple.out",    "attn_hc.mix",   "attn_hc.inject",    "mixer_out",
        "x_mid",          "mlp_hc.mix", "mlp_hc.inject", "moe.router_logits", "moe.shared_out",
        "moe.routed_out", "moe.out",    "x_out"};
    if (name == "embed") return {-1, 0};
    if (name.rfind("layers.", 0) != 0) return {INT64_MAX, 0};
    const size_t dot = name.find('.', 7);
    const int64_t layer = std::stoll(name.substr(7, dot - 7));
    const std::string stage = name.substr(dot + 1);
    for (int i = 0; i < static_cast<int>(std::size(kStages)); ++i) {
        if (stage == kStages[i]) return {layer, i};
    }
    return {layer, static_cast<int>(std::size(kStages))};
}

// The first stage (in forward order) where `primary` is off `reference` by more than
// kStageTolerance of the stage's RMS, as a line for stderr.
std::string first_divergent_stage(const ForwardTrace& primary, const ForwardTrace& reference) {
    std::vector<std::string> names;
    for (const auto& [name, values] : reference.tensors) {
        if (name.ends_with("margin") || name.ends_with("selected_blocks")) continue;
        names.push_back(name);
    }
    std::stable_sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
        return stage_order(a) < stage_order(b);
    });
    for (const std::string& name : names) {
        const std::vector<float>& expected = reference.tensors.at(name);
        const auto it = primary.tensors.find(name);
        if (it == primary.tensors.end() || it->second.size() != expected.size()) {
            return "stage " + name + " is missing from the backend's trace";
        }
        double sum = 0.0;
        double worst = 0.0;
        for (size_t i = 0; i < expected.size(); ++i) {
            sum += static_cast<double>(expected[i]) * expected[i];
            worst = std::max(worst, static_cast<double>(std::fabs(it->second[i] - expected[i])));
        }
        const double rms =
            std::sqrt(sum / static_cast<double>(std::max<size_t>(expected.size(), 1)));
        if (worst > kStageTolerance * rms + 1e-30) {
            char line[256];
            std::snprintf(line, sizeof(line),
                          "first stage off by more than %.0e of its rms: %s "
                          "(max |diff| %.3g, rms %.3g)",
                          kStageTolerance, name.c_str(), worst, rms);
            return line;
        }
    }
    return "every traced stage is within 1e-4 of its rms (the difference is in the head)";
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
        // A checkpoint of both sides, to replay the call with traces if it diverges.
        SequenceState before = state;
        const std::optional<TokenSelection> select = with_logits(options.select);
        ForwardOptions checked_options = options;
        checked_options.select = select ? &*select : nullptr;
        ForwardResult result = on_primary(
            state, [&](SequenceState& s) { return primary_.forward(s, tokens, checked_options); });
        ForwardOptions quiet = checked_options;
        quiet.trace = nullptr;
        const ForwardResult reference = reference_.forward(shadow(state), tokens, quiet);
        const Divergence d = compare(result.logits, reference.logits, vocab_size());
        report("forward", d);
        report_tokens("forward", result.tokens, reference.tokens);
        if (d.max_abs > kLogitTolerance) locate(before, tokens, quiet);
        drop_unasked_logits(result, options.select);
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
                           ForwardTrace* trace, const TokenSelection* select) override {
        const std::optional<TokenSelection> checked_select = with_logits(select);
        const TokenSelection* both = checked_select ? &*checked_select : nullptr;
        MtpResult result = on_primary(state, [&](SequenceState& s) {
            return primary_.mtp_catch_up(s, next_token, all_logits, trace, both);
        });
        const MtpResult reference =
            reference_.mtp_catch_up(shadow(state), next_token, all_logits, nullptr, both);
        report("mtp", compare(result.logits, reference.logits, vocab_size()));
        report_tokens("mtp", result.tokens, reference.tokens);
        drop_unasked_logits(result, select);
        return result;
    }

    MtpResult mtp_chain(SequenceState& state, int32_t token, int64_t position, int64_t step,
                        const TokenSelection* select) override {
        const std::optional<TokenSelection> checked_select = with_logits(select);
        const TokenSelection* both = checked_select ? &*checked_select : nullptr;
        MtpResult result = on_primary(state, [&](SequenceState& s) {
            return primary_.mtp_chain(s, token, position, step, both);
        });
        const MtpResult reference =
            reference_.mtp_chain(shadow(state), token, position, step, both);
        report("mtp-chain", compare(result.logits, reference.logits, vocab_size()));
        report_tokens("mtp-chain", result.tokens, reference.tokens);
        drop_unasked_logits(result, select);
        return result;
    }

    // The reference takes any number of rows; the backend under test sets the limit.
    int64_t max_rows_per_call() const override { return primary_.max_rows_per_call(); }

    GpuStageTotals gpu_stage_totals() const override { return primary_.gpu_stage_totals(); }
    GpuStageTotals prefill_gpu_stage_totals() const override {
        return primary_.prefill_gpu_stage_totals();
    }

    BackendStats backend_stats() const override {
        BackendStats stats = primary_.backend_stats();
        stats.check = CheckFigures{.calls = calls_,
                                   .rows = rows_,
                                   .argmax_equal = argmax_equal_,
                                   .max_abs_logit_diff = worst_,
                                   .selected_tokens = selected_,
                                   .selected_equal = selected_equal_};
        return stats;
    }

private:
    // Replays a diverging forward call from its checkpoint with traces on both sides and says
    // where they part.
    void locate(SequenceState& before, std::span<const int32_t> tokens, ForwardOptions options) {
        ForwardTrace primary_trace;
        ForwardTrace reference_trace;
        options.trace = &primary_trace;
        on_primary(before, [&](SequenceState& s) { return primary_.forward(s, tokens, options); });
        options.trace = &reference_trace;
        reference_.forward(shadow(before), tokens, options);
        std::fprintf(stderr, "check: %s\n",
                     first_divergent_stage(primary_trace, reference_trace).c_str());
    }

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

    // Token ids both sides picked for the same choices: a difference is reported (the primary's
    // are used), with the near-tie of logits that usually explains it left to the logit line.
    void report_tokens(const char* what, const std::vector<int32_t>& primary,
                       const std::vector<int32_t>& reference) {
        if (primary.size() != reference.size()) {
            throw_internal("--check: the backends returned different token counts");
        }
        selected_ += static_cast<int64_t>(primary.size());
        for (size_t row = 0; row < primary.size(); ++row) {
            if (primary[row] == reference[row]) {
                ++selected_equal_;
                continue;
            }
            std::fprintf(stderr,
                         "check: %s row %zu: the backend picked token %d, the reference %d\n", what,
                         row, primary[row], reference[row]);
        }
    }

    ModelBackend& primary_;
    ModelBackend& reference_;
    int64_t selected_ = 0;
    int64_t selected_equal_ = 0;
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
