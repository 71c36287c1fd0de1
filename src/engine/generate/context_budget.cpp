#include "engine/generate/context_budget.h"

#include <algorithm>
#include <cstdio>

#include "base/error.h"
#include "engine/experts/pool_budget.h"
#include "engine/model/sequence_state_size.h"

namespace cherenkov::engine {

int64_t needed_context(const ContextRequest& request) {
    return request.prompt_tokens + std::max<int64_t>(request.max_tokens, 1) +
           std::max<int64_t>(request.drafts, 0);
}

void check_context_budget(const ContextRequest& request, const ContextNames& names) {
    const std::string max_ctx = names.max_ctx + " " + std::to_string(request.max_ctx);
    const int64_t needed = needed_context(request);
    if (needed <= request.max_ctx) return;
    const std::string raise = "raise " + names.max_ctx + " to at least " + std::to_string(needed);
    if (request.prompt_tokens >= request.max_ctx) {
        throw_invalid("the prompt has " + std::to_string(request.prompt_tokens) +
                      " tokens, more than " + max_ctx +
                      " allows (it needs room for at least one generated token); " + raise);
    }
    std::string message = "the prompt's " + std::to_string(request.prompt_tokens) + " tokens + " +
                          names.max_tokens + " " + std::to_string(request.max_tokens);
    if (request.drafts > 0) {
        message += " + " + std::to_string(request.drafts) + " tokens of draft headroom (" +
                   names.drafts + " " + std::to_string(request.drafts) + ")";
    }
    message += " need a context of " + std::to_string(needed) + " tokens, more than " + max_ctx;
    const int64_t most_output = request.max_ctx - request.prompt_tokens - request.drafts;
    if (most_output >= 1) {
        message +=
            "; lower " + names.max_tokens + " to " + std::to_string(most_output) + " or " + raise;
    } else {
        message += "; " + raise;
    }
    throw_invalid(message);
}

std::string byte_size_text(uint64_t bytes) {
    static constexpr const char* kUnits[] = {"bytes", "kB", "MB", "GB", "TB", "PB", "EB"};
    auto value = static_cast<double>(bytes);
    size_t unit = 0;
    while (value >= 1000.0 && unit + 1 < std::size(kUnits)) {
        value /= 1000.0;
        ++unit;
    }
    char text[32];
    if (unit == 0) {
        std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
    } else {
        std::snprintf(text, sizeof text, value < 9.95 ? "%.1f %s" : "%.0f %s", value, kUnits[unit]);
    }
    return text;
}

uint64_t available_memory_bytes() {
    return read_available_memory(MemorySources{}).usable_bytes();
}

void check_context_capacity(const model_data::qwen4_exp::Config& config, int64_t max_ctx,
                            int64_t n_mtp_layers, int64_t snapshot_rows, uint64_t available_bytes,
                            const std::string& subject, const std::string& config_file) {
    if (config.max_position_embeddings && max_ctx > *config.max_position_embeddings) {
        throw_invalid(subject + " is more than the model's " +
                      std::to_string(*config.max_position_embeddings) +
                      " positions (max_position_embeddings in " + config_file + ")");
    }
    const auto bytes = [&](int64_t ctx) {
        return sequence_state_bytes(config, ctx, n_mtp_layers, snapshot_rows);
    };
    const uint64_t needed = bytes(max_ctx);
    if (needed <= available_bytes) return;
    // The largest context that fits: bytes() grows with the context, so bisect.
    int64_t low = 0;
    int64_t high = max_ctx;
    while (low < high) {
        const int64_t mid = low + (high - low + 1) / 2;
        if (bytes(mid) <= available_bytes) {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    std::string message = subject + " needs " + byte_size_text(needed) +
                          " of sequence state; this machine has " +
                          byte_size_text(available_bytes) + " available";
    message += low > 0 ? ", enough for at most " + std::to_string(low) + " tokens of context"
                       : ", not enough for any context";
    throw Error(ErrorKind::ResourceExhausted, message);
}

}  // namespace cherenkov::engine
