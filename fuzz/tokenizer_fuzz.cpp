// Fuzzes the tokenizer. The first byte picks the mode:
//   odd:  the rest is a tokenizer.json; loading may fail only with cherenkov::Error, and a
//         tokenizer that loads must encode sample texts and decode every id it produces;
//   even: the rest is text for a fixed small tokenizer built here (Qwen2 regex, NFC, added
//         tokens with every flag). Invalid UTF-8 must be rejected with an Error; valid text must
//         give ids in range whose streamed decode equals decode and is valid UTF-8.
// Any other exception, a crash, or a broken invariant aborts.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "text/tokenizer/byte_level.h"
#include "text/tokenizer/streaming_detokenizer.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/tokenizer_spec.h"
#include "text/tokenizer/utf8.h"

namespace {

using cherenkov::text::Tokenizer;

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "tokenizer_fuzz: %s\n", what);
    std::abort();
}

// A byte-level BPE over the 256 byte characters plus a few merges, with added tokens that use
// lstrip, rstrip, single_word and normalized.
std::string small_tokenizer_json() {
    nlohmann::json vocab = nlohmann::json::object();
    int32_t next_id = 0;
    for (unsigned byte = 0; byte < 256; ++byte) {
        vocab[std::string(cherenkov::text::byte_level_utf8(static_cast<uint8_t>(byte)))] =
            next_id++;
    }
    const std::vector<std::pair<std::string, std::string>> pairs = {
        {"Ġ", "t"},   {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}, {"e", "r"}, {"Ġ", "Ġ"},
        {"ĠĠ", "ĠĠ"}, {"o", "n"}, {"Ã", "©"},   {"ä", "½"}, {"Ċ", "Ċ"}, {"'", "s"}, {"1", "2"},
    };
    nlohmann::json merges = nlohmann::json::array();
    for (const auto& [left, right] : pairs) {
        if (!vocab.contains(left + right)) vocab[left + right] = next_id++;
        merges.push_back({left, right});
    }
    auto added = [&](const char* content, bool special, bool lstrip, bool rstrip, bool single_word,
                     bool normalized) {
        return nlohmann::json{{"id", next_id++},         {"content", content},
                              {"special", special},      {"lstrip", lstrip},
                              {"rstrip", rstrip},        {"single_word", single_word},
                              {"normalized", normalized}};
    };
    nlohmann::json added_tokens = nlohmann::json::array();
    added_tokens.push_back(added("<|im_start|>", true, false, false, false, false));
    added_tokens.push_back(added("<|im_end|>", true, false, false, false, false));
    added_tokens.push_back(added("<mask>", true, true, true, false, false));
    added_tokens.push_back(added("word", false, false, false, true, true));
    added_tokens.push_back(added("e\xCC\x81t\xC3\xA9", false, false, false, false, true));
    nlohmann::json pattern = {{"Regex", cherenkov::text::kQwen2Pattern}};
    nlohmann::json document = {
        {"version", "1.0"},
        {"added_tokens", added_tokens},
        {"normalizer", {{"type", "NFC"}}},
        {"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", pattern}, {"behavior", "Isolated"}, {"invert", false}},
            {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}}},
        {"decoder", {{"type", "ByteLevel"}}},
        {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
    };
    return document.dump();
}

const Tokenizer& small_tokenizer() {
    static const Tokenizer tokenizer =
        Tokenizer::from_json(small_tokenizer_json(), std::nullopt, "fuzz");
    return tokenizer;
}

// Encoding invariants for text that is valid UTF-8.
void check_round_trip(const Tokenizer& tokenizer, std::string_view text, bool parse_special) {
    const std::vector<int32_t> ids = tokenizer.encode(text, parse_special);
    for (const int32_t id : ids) {
        if (id < 0 || static_cast<size_t>(id) >= tokenizer.vocab_size() ||
            !tokenizer.token_text(id)) {
            fail("encode produced an id outside the vocabulary");
        }
    }
    const std::string decoded = tokenizer.decode(ids);
    if (cherenkov::text::find_invalid_utf8(decoded) != cherenkov::text::kValidUtf8) {
        fail("decode produced invalid UTF-8");
    }
    cherenkov::text::StreamingDetokenizer stream(tokenizer);
    std::string streamed;
    for (const int32_t id : ids) {
        const std::string piece = stream.push(id);
        if (cherenkov::text::find_invalid_utf8(piece) != cherenkov::text::kValidUtf8) {
            fail("streaming split a character");
        }
        streamed += piece;
    }
    streamed += stream.finish();
    if (streamed != decoded) fail("streamed text differs from decode");
}

void fuzz_text(std::string_view text) {
    const Tokenizer& tokenizer = small_tokenizer();
    const bool valid = cherenkov::text::find_invalid_utf8(text) == cherenkov::text::kValidUtf8;
    try {
        check_round_trip(tokenizer, text, true);
        check_round_trip(tokenizer, text, false);
    } catch (const cherenkov::Error& e) {
        if (valid || e.kind() != cherenkov::ErrorKind::InvalidInput) fail(e.what());
        return;
    }
    if (!valid) fail("invalid UTF-8 was accepted");
}

void fuzz_tokenizer_json(std::string_view json) {
    std::optional<Tokenizer> tokenizer;
    try {
        tokenizer = Tokenizer::from_json(json, std::nullopt, "fuzz");
    } catch (const cherenkov::Error&) {
        return;
    }
    static const char* const kSamples[] = {
        "Hello, world! It's 2024.",          "  spaces\t\tand\r\nlines\n\n",
        "日本語 😀 👨‍👩‍👧", "e\xCC\x81 \xC3\xA9 \xEF\xAC\x81",
        "<|im_start|>user<|im_end|>",        "",
    };
    try {
        for (const char* sample : kSamples) {
            check_round_trip(*tokenizer, sample, true);
            check_round_trip(*tokenizer, sample, false);
        }
        const size_t n_ids = std::min<size_t>(tokenizer->vocab_size(), 512);
        std::vector<int32_t> ids;
        for (size_t id = 0; id < n_ids; ++id) {
            if (tokenizer->token_text(static_cast<int32_t>(id)))
                ids.push_back(static_cast<int32_t>(id));
        }
        tokenizer->decode(ids, true);
    } catch (const cherenkov::Error& e) {
        // A tokenizer that loads may still fail to encode only for resource limits in its regex.
        if (e.kind() != cherenkov::ErrorKind::ResourceExhausted) fail(e.what());
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
    if ((data[0] & 1) != 0) {
        fuzz_tokenizer_json(rest);
    } else {
        fuzz_text(rest);
    }
    return 0;
}
