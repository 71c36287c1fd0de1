// Text <-> token ids exactly as Hugging Face `tokenizers` does for a checkpoint's
// tokenizer.json (or vocab.json + merges.txt + tokenizer_config.json, as transformers' Qwen2
// tokenizer builds it). Encoding: added tokens split out first, then normalization,
// pre-tokenization and byte-level BPE. A Tokenizer is immutable; copies share its tables and
// every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::text {

class Tokenizer {
public:
    // Loads dir/tokenizer.json (+ dir/tokenizer_config.json when present), or else
    // dir/vocab.json + dir/merges.txt (+ tokenizer_config.json). Errors name the file and field.
    static Tokenizer load_directory(const std::string& dir);
    // `name` labels tokenizer.json in errors (a path, usually).
    static Tokenizer from_json(std::string_view tokenizer_json,
                               std::optional<std::string_view> tokenizer_config_json,
                               const std::string& name);

    // Token ids of `text` without any BOS/EOS (encode(..., add_special_tokens=False)).
    // With `parse_special` false, special added tokens in the text are encoded as plain text
    // (tokenizers' encode_special_tokens); non-special added tokens still match.
    // Throws InvalidInput naming the byte offset when `text` is not valid UTF-8: Hugging Face's
    // API only takes Python str, so there is no HF result for invalid bytes to match.
    std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;

    // Text of `ids`, invalid UTF-8 replaced by U+FFFD as tokenizers' decode does. Throws
    // InvalidInput naming an id that is not in the vocabulary (tokenizers drops those silently).
    std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

    std::optional<int32_t> token_id(std::string_view token) const;
    // The token's string as in the vocabulary (byte-level alphabet, e.g. "Ġthe"), or an added
    // token's content: tokenizers' id_to_token.
    std::optional<std::string_view> token_text(int32_t id) const;
    // The raw bytes one id decodes to (possibly a partial UTF-8 character).
    std::optional<std::string_view> token_bytes(int32_t id) const;
    // One past the largest id (model vocabulary and added tokens).
    size_t vocab_size() const;
    // From tokenizer_config.json's eos_token / pad_token.
    std::optional<int32_t> eos_token_id() const;
    std::optional<int32_t> pad_token_id() const;
    bool is_special(int32_t id) const;

    // Opaque outside src/text/tokenizer (defined in tokenizer_impl.h).
    struct Impl;

private:
    friend class StreamingDetokenizer;

    explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

    // Copies share the immutable tables; a streaming detokenizer keeps its tokenizer alive.
    std::shared_ptr<const Impl> impl_;
};

}  // namespace cherenkov::text
