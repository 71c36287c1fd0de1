// Private to src/text/tokenizer: the compiled parts behind a Tokenizer handle.
#pragma once

#include <optional>
#include <string>

#include "text/tokenizer/added_tokens.h"
#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/decoder.h"
#include "text/tokenizer/normalizer.h"
#include "text/tokenizer/pre_tokenizer.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/tokenizer_spec.h"
#include "text/tokenizer/word_cache.h"

namespace cherenkov::text {

struct Tokenizer::Impl {
    // Compiles `spec`; with `config`, adds its added tokens not in the spec and resolves the
    // eos/pad names. Errors name `json_name` or `config_name`.
    Impl(TokenizerSpec spec, const std::optional<TokenizerConfigSpec>& config,
         const std::string& json_name, const std::string& config_name);

    Normalizer normalizer;
    PreTokenizer pre_tokenizer;
    BpeModel model;
    AddedVocabulary added;
    DecodeTable decode_table;
    std::optional<int32_t> eos_id;
    std::optional<int32_t> pad_id;
    WordCache word_cache;  // internally synchronized; Impl is otherwise immutable
};

}  // namespace cherenkov::text
