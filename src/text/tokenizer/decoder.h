// The tokenizer.json "decoder" and what every id decodes to. ByteLevel maps the byte-level
// alphabet back to bytes; without a decoder, token strings are joined with single spaces
// (Hugging Face's default). Decoding then makes the joined bytes valid UTF-8 (U+FFFD for each
// maximal invalid subpart), so one table serves decode and the streaming detokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer/added_tokens.h"
#include "text/tokenizer/bpe_model.h"

namespace cherenkov::text {

enum class DecoderKind { None, ByteLevel };

class DecodeTable {
public:
    DecodeTable() = default;
    DecodeTable(DecoderKind kind, const BpeModel& model, const AddedVocabulary& added);

    // One past the largest id of the model or the added tokens.
    int32_t id_limit() const { return static_cast<int32_t>(flags_.size()); }
    bool known(int32_t id) const {
        return in_range(id) && (flags_[static_cast<size_t>(id)] & kKnown) != 0;
    }
    // Special as decode's skip_special sees it: the id's text is a special added token's.
    bool special(int32_t id) const {
        return in_range(id) && (flags_[static_cast<size_t>(id)] & kSpecial) != 0;
    }
    // Hugging Face's id_to_token: an added token's (normalized) content, else the vocab piece.
    std::string_view token_text(int32_t id) const { return slice(text_offsets_, text_pool_, id); }
    // The bytes `id` decodes to on its own.
    std::string_view token_bytes(int32_t id) const { return slice(byte_offsets_, byte_pool_, id); }

    // Appends the bytes of known `id` to `bytes` (after the separator unless `first`). Returns
    // false, appending nothing, when `skip_special` drops it.
    bool append(int32_t id, bool skip_special, bool& first, std::string& bytes) const;

private:
    static constexpr uint8_t kKnown = 1;
    static constexpr uint8_t kSpecial = 2;

    bool in_range(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < flags_.size(); }
    std::string_view slice(const std::vector<uint32_t>& offsets, const std::string& pool,
                           int32_t id) const;

    DecoderKind kind_ = DecoderKind::None;
    std::vector<uint8_t> flags_;
    std::vector<uint32_t> text_offsets_;  // id_limit + 1 entries into text_pool_
    std::string text_pool_;
    std::vector<uint32_t> byte_offsets_;  // id_limit + 1 entries into byte_pool_
    std::string byte_pool_;
};

}  // namespace cherenkov::text
