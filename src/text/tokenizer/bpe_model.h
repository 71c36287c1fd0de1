// The BPE model of tokenizer.json: vocabulary, ranked merges, and the word-level merge loop
// (Hugging Face tokenizers models/bpe: merge_word + Word::merge_all), including unk_token,
// fuse_unk, byte_fallback, continuing_subword_prefix, end_of_word_suffix and ignore_merges.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "text/tokenizer/merge_table.h"

namespace cherenkov::text {

struct BpeSpec {
    std::vector<std::pair<std::string, int64_t>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;
    std::optional<std::string> unk_token;
    std::string continuing_subword_prefix;
    std::string end_of_word_suffix;
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
    // Where the vocabulary and merges came from, for errors ("model.vocab", "merges.txt").
    std::string vocab_field = "model.vocab";
    std::string merges_field = "model.merges";
};

// Ids are dense-ish: a table indexed by id is allocated, so ids must stay below this.
inline constexpr int64_t kMaxTokenId = int64_t{1} << 24;

// Buffers reused across words by one thread.
struct BpeScratch {
    std::vector<int32_t> symbols;
    std::vector<uint32_t> ranks;
    std::vector<int32_t> merged;
    std::vector<int32_t> prev;
    std::vector<int32_t> next;
    std::vector<uint64_t> heap;
    std::string text;
    std::string key;
};

struct TransparentStringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
};

using TokenIdMap = std::unordered_map<std::string, int32_t, TransparentStringHash, std::equal_to<>>;

class BpeModel {
public:
    BpeModel() = default;
    // Validates the vocabulary and merges; throws Corrupt/Unsupported naming the field.
    explicit BpeModel(BpeSpec spec);

    std::optional<int32_t> token_id(std::string_view token) const;
    std::optional<std::string_view> token_text(int32_t id) const;
    // Number of vocabulary entries (Hugging Face's BPE get_vocab_size).
    size_t n_entries() const { return token_ids_.size(); }
    // One past the largest id in the vocabulary.
    int32_t id_limit() const { return static_cast<int32_t>(tokens_.size()); }

    // Appends the ids of one pre-tokenized piece. With `raw_bytes`, `piece` holds raw bytes
    // that a final ByteLevel step would have mapped to the byte-level alphabet.
    void tokenize(std::string_view piece, bool raw_bytes, BpeScratch& scratch,
                  std::vector<int32_t>& out) const;

private:
    void initial_symbols(std::string_view word, BpeScratch& scratch) const;
    void merge_symbols(BpeScratch& scratch) const;
    void merge_short(BpeScratch& scratch) const;
    void merge_long(BpeScratch& scratch) const;
    std::optional<int32_t> lookup(std::string_view token) const;

    TokenIdMap token_ids_;
    std::vector<std::string> tokens_;  // indexed by id
    std::vector<bool> present_;        // whether tokens_[id] is a vocabulary entry
    MergeTable merges_;
    int32_t byte_ids_[256] = {};  // id of each byte's byte-level character, or -1
    std::optional<int32_t> unk_id_;
    std::string prefix_;
    std::string suffix_;
    bool fuse_unk_ = false;
    bool byte_fallback_ = false;
    bool ignore_merges_ = false;
};

}  // namespace cherenkov::text
