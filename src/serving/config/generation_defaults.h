// What a request starts from for the fields it omits (the configuration's [defaults] and
// [defaults.sampling]; docs/configuration.md). A request takes a copy when it arrives and keeps
// it to the end, so a reload changes only the requests that arrive after it.
#pragma once

#include <cstdint>

#include "engine/generate/sampler.h"

namespace cherenkov::serving::config {

struct GenerationDefaults {
    // Output tokens of a request that gives no max_tokens; 0: the rest of the context (a
    // positive value is also cut to what the context leaves).
    int64_t max_tokens = 0;
    // Whether generation ends at an EOS token. Server-owned: no request field changes it.
    bool stop_at_eos = true;
    engine::SamplingOptions sampling;
};

}  // namespace cherenkov::serving::config
