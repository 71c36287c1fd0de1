// Plain descriptions of a tokenizer's parts, parsed from tokenizer.json, tokenizer_config.json
// or vocab.json + merges.txt, before they are compiled into the working Tokenizer.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "text/tokenizer/added_tokens.h"
#include "text/tokenizer/bpe_model.h"
#include "text/tokenizer/decoder.h"
#include "text/tokenizer/normalizer.h"
#include "text/tokenizer/pre_tokenizer.h"

namespace cherenkov::text {

struct TokenizerSpec {
    std::vector<UnicodeForm> normalizer;
    std::vector<PreTokenizerStep> pre_tokenizer;
    BpeSpec model;
    std::vector<AddedTokenSpec> added_tokens;
    DecoderKind decoder = DecoderKind::None;
};

struct TokenizerConfigSpec {
    std::optional<std::string> eos_token;
    std::optional<std::string> pad_token;
    std::vector<AddedTokenSpec> added_tokens;  // added_tokens_decoder, by ascending id
    std::optional<std::string> tokenizer_class;
    std::optional<std::string> pretokenize_regex;
    bool add_prefix_space = false;
};

// The pre-tokenizer regex of Qwen2 / Qwen2.5 / Qwen3 (transformers' Qwen2Converter).
inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Parsers throw Corrupt (or Unsupported) naming the JSON field; the caller adds the file name.
TokenizerSpec parse_tokenizer_json(std::string_view text);
TokenizerConfigSpec parse_tokenizer_config(std::string_view text);

// What transformers' Qwen2Tokenizer builds from vocab.json + merges.txt: NFC, the Qwen2 regex
// (or the config's pretokenize_regex), ByteLevel without regex, ByteLevel decoder, and the
// config's added tokens. Errors name vocab.json, merges.txt or tokenizer_config.json.
TokenizerSpec spec_from_vocab_and_merges(std::string_view vocab_json, std::string_view merges_txt,
                                         const TokenizerConfigSpec& config);

}  // namespace cherenkov::text
