// What the server knows about the model it serves: the backend the worker runs, the text files
// (tokenizer, chat template), the server-owned generation policy (EOS ids, drafts, where
// requests take their defaults from) and the names clients may call it by.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/generate/sampler.h"
#include "engine/model/model_backend.h"
#include "engine/model/prefill_quantum.h"
#include "serving/config/generation_defaults.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::serving {

struct ServedModel {
    ServedModel(engine::ModelBackend& backend, text::Tokenizer text_tokenizer)
        : model(&backend), tokenizer(std::move(text_tokenizer)) {}

    engine::ModelBackend* model;
    text::Tokenizer tokenizer;
    std::optional<text::ChatTemplate> chat_template;  // none: chat completions are refused
    std::vector<int32_t> eos_ids;                     // generation stops at these
    std::vector<std::string> names;                   // "cherenkov" first, then alias and ID
    int drafts = 2;                                   // --drafts: MTP drafts per step
    engine::PrefillQuantum prefill_quantum;
    // Where requests take their defaults from when they arrive (the configuration's
    // config::ConfigHolder, which a reload updates); null: the built-in defaults.
    std::function<config::GenerationDefaults()> current_defaults;

    config::GenerationDefaults defaults() const {
        return current_defaults ? current_defaults() : config::GenerationDefaults{};
    }
};

}  // namespace cherenkov::serving
