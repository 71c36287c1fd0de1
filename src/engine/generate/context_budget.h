// Whether a request fits a context, checked before any model loads (seed "Precision and
// memory": the runner checks prompt, requested output and draft headroom against --max-ctx
// before loading the model), and whether that context can be had at all: the model's position
// limit and the memory one sequence's state needs. The CLI names its flags in the messages, the
// server its JSON fields, through ContextNames.
#pragma once

#include <cstdint>
#include <string>

#include "model_data/qwen4_exp/config.h"

namespace cherenkov::engine {

// What the messages call each quantity.
struct ContextNames {
    std::string max_tokens = "--max-tokens";
    std::string drafts = "--drafts";
    std::string max_ctx = "--max-ctx";
};

struct ContextRequest {
    int64_t prompt_tokens = 0;
    int64_t max_tokens = 0;  // the requested output
    // Speculative headroom: the drafts one step may verify past the output (0 without MTP
    // speculation).
    int64_t drafts = 0;
    int64_t max_ctx = 0;
};

// The context the request needs: prompt + output (at least one token: a generation always
// emits one) + drafts.
int64_t needed_context(const ContextRequest& request);

// Throws InvalidInput when needed_context(request) exceeds max_ctx, naming the prompt's tokens,
// each figure with its name, the total, and the largest output that fits.
void check_context_budget(const ContextRequest& request, const ContextNames& names = {});

// "2.3 TB", "21 GB", "512 kB": decimal units, two significant digits below 10.
std::string byte_size_text(uint64_t bytes);

// The memory this process may still allocate: MemAvailable capped by the cgroup limit
// (engine/experts/pool_budget.h).
uint64_t available_memory_bytes();

// Checks that a context of `max_ctx` tokens can be had: at most the model's
// max_position_embeddings (when config.json gives it), and a sequence state
// (sequence_state_bytes with `n_mtp_layers` and `snapshot_rows`) no larger than
// `available_bytes`. `subject` opens each message ("--max-ctx 100000000"); `config_file` names
// where the limit came from. Throws InvalidInput for the position limit, ResourceExhausted for
// memory ("--max-ctx 100000000 needs 2.3 TB of sequence state; this machine has 21 GB
// available, enough for at most 850000 tokens of context").
void check_context_capacity(const model_data::qwen4_exp::Config& config, int64_t max_ctx,
                            int64_t n_mtp_layers, int64_t snapshot_rows, uint64_t available_bytes,
                            const std::string& subject, const std::string& config_file);

}  // namespace cherenkov::engine
