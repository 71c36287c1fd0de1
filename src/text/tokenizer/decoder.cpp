// Builds the per-id text and bytes once at load, following tokenizers' Tokenizer::decode
// (added tokens first, then the model) and decoders/byte_level.rs.
#include "text/tokenizer/decoder.h"

#include <algorithm>

#include "base/error.h"
#include "text/tokenizer/byte_level.h"

namespace cherenkov::text {

DecodeTable::DecodeTable(DecoderKind kind, const BpeModel& model, const AddedVocabulary& added)
    : kind_(kind) {
    const int32_t limit = std::max(model.id_limit(), added.id_limit());
    flags_.assign(static_cast<size_t>(limit), 0);
    text_offsets_.reserve(static_cast<size_t>(limit) + 1);
    byte_offsets_.reserve(static_cast<size_t>(limit) + 1);
    text_offsets_.push_back(0);
    byte_offsets_.push_back(0);
    for (int32_t id = 0; id < limit; ++id) {
        std::optional<std::string_view> text = added.decode_text(id);
        if (!text) text = model.token_text(id);
        if (text) {
            uint8_t flags = kKnown;
            if (added.is_special_content(*text)) flags |= kSpecial;
            flags_[static_cast<size_t>(id)] = flags;
            text_pool_.append(*text);
            if (kind == DecoderKind::ByteLevel) {
                append_byte_level_decoded(*text, byte_pool_);
            } else {
                byte_pool_.append(*text);
            }
        }
        if (text_pool_.size() > UINT32_MAX || byte_pool_.size() > UINT32_MAX) {
            throw_corrupt("the vocabulary's text exceeds 4 GiB");
        }
        text_offsets_.push_back(static_cast<uint32_t>(text_pool_.size()));
        byte_offsets_.push_back(static_cast<uint32_t>(byte_pool_.size()));
    }
}

std::string_view DecodeTable::slice(const std::vector<uint32_t>& offsets, const std::string& pool,
                                    int32_t id) const {
    if (!in_range(id)) return {};
    const uint32_t begin = offsets[static_cast<size_t>(id)];
    const uint32_t end = offsets[static_cast<size_t>(id) + 1];
    return std::string_view(pool).substr(begin, end - begin);
}

bool DecodeTable::append(int32_t id, bool skip_special, bool& first, std::string& bytes) const {
    if (skip_special && special(id)) return false;
    if (!first && kind_ == DecoderKind::None) bytes.push_back(' ');
    first = false;
    bytes.append(token_bytes(id));
    return true;
}

}  // namespace cherenkov::text
