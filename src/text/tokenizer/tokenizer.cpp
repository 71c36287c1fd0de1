// Encode and decode. Encoding follows tokenizers' encode_single_sequence: added tokens with
// normalized=false are split out of the raw text; each remaining segment is normalized on its
// own, searched for normalized added tokens, pre-tokenized, and every piece goes through BPE.
#include "text/tokenizer/tokenizer.h"

#include <functional>

#include "base/error.h"
#include "text/tokenizer/tokenizer_impl.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {
namespace {

// Everything one encode call reuses between segments and pieces.
struct EncodeScratch {
    std::vector<AddedSegment> raw_segments;
    std::vector<AddedSegment> normalized_segments;
    std::string normalized;
    PreTokenizerScratch pre_tokenizer;
    BpeScratch bpe;
};

// Receives pre-tokenized pieces and appends their BPE ids, through the word cache.
class BpeSink final : public PieceSink {
public:
    BpeSink(const Tokenizer::Impl& impl, EncodeScratch& scratch, std::vector<int32_t>& ids)
        : impl_(impl),
          scratch_(scratch),
          ids_(ids),
          raw_bytes_(impl.pre_tokenizer.emits_raw_bytes()) {}

    void piece(std::string_view text) override {
        const bool cacheable = text.size() <= WordCache::kMaxWordBytes;
        uint64_t hash = 0;
        if (cacheable) {
            hash = WordCache::hash(text);
            if (impl_.word_cache.lookup(text, hash, ids_)) return;
        }
        const size_t before = ids_.size();
        impl_.model.tokenize(text, raw_bytes_, scratch_.bpe, ids_);
        if (cacheable) {
            impl_.word_cache.insert(text, hash, ids_.data() + before, ids_.size() - before);
        }
    }

private:
    const Tokenizer::Impl& impl_;
    EncodeScratch& scratch_;
    std::vector<int32_t>& ids_;
    bool raw_bytes_;
};

void encode_segment(const Tokenizer::Impl& impl, std::string_view segment, bool parse_special,
                    EncodeScratch& scratch, BpeSink& sink, std::vector<int32_t>& ids) {
    const std::string_view normalized = impl.normalizer.normalize(segment, scratch.normalized);
    if (!impl.added.has_pass(AddedVocabulary::Pass::Normalized)) {
        impl.pre_tokenizer.split(normalized, scratch.pre_tokenizer, sink);
        return;
    }
    scratch.normalized_segments.clear();
    impl.added.split(normalized, AddedVocabulary::Pass::Normalized, parse_special,
                     scratch.normalized_segments);
    for (const AddedSegment& part : scratch.normalized_segments) {
        if (part.id >= 0) {
            ids.push_back(part.id);
        } else if (part.end > part.begin) {
            impl.pre_tokenizer.split(normalized.substr(part.begin, part.end - part.begin),
                                     scratch.pre_tokenizer, sink);
        }
    }
}

}  // namespace

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
    const size_t invalid_at = find_invalid_utf8(text);
    if (invalid_at != kValidUtf8) {
        throw_invalid("text is not valid UTF-8 at byte " + std::to_string(invalid_at) +
                      " (tokenizers only encodes valid UTF-8 strings)");
    }
    const Impl& impl = *impl_;
    std::vector<int32_t> ids;
    ids.reserve(text.size() / 3 + 4);
    EncodeScratch scratch;
    BpeSink sink(impl, scratch, ids);
    impl.added.split(text, AddedVocabulary::Pass::Raw, parse_special, scratch.raw_segments);
    for (const AddedSegment& segment : scratch.raw_segments) {
        if (segment.id >= 0) {
            ids.push_back(segment.id);
        } else if (segment.end > segment.begin) {
            encode_segment(impl, text.substr(segment.begin, segment.end - segment.begin),
                           parse_special, scratch, sink, ids);
        }
    }
    return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    const DecodeTable& table = impl_->decode_table;
    std::string bytes;
    bool first = true;
    for (const int32_t id : ids) {
        if (!table.known(id)) {
            throw_invalid("cannot decode id " + std::to_string(id) + ": not in the vocabulary (" +
                          std::to_string(table.id_limit()) + " ids)");
        }
        table.append(id, skip_special, first, bytes);
    }
    if (find_invalid_utf8(bytes) == kValidUtf8) return bytes;
    std::string text;
    text.reserve(bytes.size() + 16);
    append_utf8_lossy(bytes, text);
    return text;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
    if (std::optional<int32_t> id = impl_->added.token_id(token)) return id;
    return impl_->model.token_id(token);
}

std::optional<std::string_view> Tokenizer::token_text(int32_t id) const {
    if (!impl_->decode_table.known(id)) return std::nullopt;
    return impl_->decode_table.token_text(id);
}

std::optional<std::string_view> Tokenizer::token_bytes(int32_t id) const {
    if (!impl_->decode_table.known(id)) return std::nullopt;
    return impl_->decode_table.token_bytes(id);
}

size_t Tokenizer::vocab_size() const {
    return static_cast<size_t>(impl_->decode_table.id_limit());
}

std::optional<int32_t> Tokenizer::eos_token_id() const {
    return impl_->eos_id;
}

std::optional<int32_t> Tokenizer::pad_token_id() const {
    return impl_->pad_id;
}

bool Tokenizer::is_special(int32_t id) const {
    return impl_->decode_table.special(id);
}

}  // namespace cherenkov::text
