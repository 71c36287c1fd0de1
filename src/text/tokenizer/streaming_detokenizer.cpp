// StreamingDetokenizer: per-id bytes from the decode table, then the lossy UTF-8 conversion
// run over the held bytes, stopping before a trailing sequence that may still complete.
#include "text/tokenizer/streaming_detokenizer.h"

#include "base/error.h"
#include "text/tokenizer/tokenizer_impl.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::text {

StreamingDetokenizer::StreamingDetokenizer(Tokenizer tokenizer, bool skip_special)
    : tokenizer_(std::move(tokenizer)), skip_special_(skip_special) {}

std::string StreamingDetokenizer::push(int32_t id) {
    const DecodeTable& table = tokenizer_.impl_->decode_table;
    if (!table.known(id)) {
        throw_invalid("cannot decode id " + std::to_string(id) + ": not in the vocabulary (" +
                      std::to_string(table.id_limit()) + " ids)");
    }
    std::string text;
    if (!table.append(id, skip_special_, first_, pending_)) return text;
    const size_t consumed = append_utf8_lossy(pending_, text, /*final_chunk=*/false);
    pending_.erase(0, consumed);
    return text;
}

std::string StreamingDetokenizer::finish() {
    std::string text;
    append_utf8_lossy(pending_, text, /*final_chunk=*/true);
    pending_.clear();
    first_ = true;
    return text;
}

}  // namespace cherenkov::text
