// tokenizer.json (Hugging Face tokenizers' serialization, version "1.0") into a TokenizerSpec.
// Supported: model BPE; normalizer NFC/NFD/NFKC/NFKD/Sequence/null; pre_tokenizer
// Split/ByteLevel/Sequence/null; decoder ByteLevel/null. post_processor, truncation and padding
// are ignored: encode never adds special tokens, truncates or pads. Anything else is Unsupported.
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "text/tokenizer/json_field.h"
#include "text/tokenizer/tokenizer_spec.h"

namespace cherenkov::text {
namespace {

// Sequences nest; real files use one level. Deeper nesting is refused before it can exhaust the
// stack of the recursive readers below.
constexpr int kMaxNesting = 32;
constexpr size_t kMaxPreTokenizerSteps = 256;

void check_nesting(const JsonField& field, int depth) {
    if (depth > kMaxNesting)
        field.fail("nested more than " + std::to_string(kMaxNesting) + " deep");
}

void parse_normalizer(const JsonField& field, std::vector<UnicodeForm>& forms, int depth = 0) {
    check_nesting(field, depth);
    const std::string type = field.at("type").as_string();
    if (type == "NFC") {
        forms.push_back(UnicodeForm::Nfc);
    } else if (type == "NFD") {
        forms.push_back(UnicodeForm::Nfd);
    } else if (type == "NFKC") {
        forms.push_back(UnicodeForm::Nfkc);
    } else if (type == "NFKD") {
        forms.push_back(UnicodeForm::Nfkd);
    } else if (type == "Sequence") {
        const JsonField steps = field.at("normalizers");
        for (size_t index = 0; index < steps.array_size(); ++index) {
            parse_normalizer(steps.at(index), forms, depth + 1);
        }
    } else {
        field.at("type").unsupported("normalizer '" + type +
                                     "' is not supported (NFC, NFD, NFKC, NFKD, Sequence)");
    }
}

SplitBehavior parse_behavior(const JsonField& field) {
    const std::string name = field.as_string();
    if (name == "Removed") return SplitBehavior::Removed;
    if (name == "Isolated") return SplitBehavior::Isolated;
    if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
    if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
    if (name == "Contiguous") return SplitBehavior::Contiguous;
    field.fail("unknown split behavior '" + name + "'");
}

SplitStep parse_split(const JsonField& field) {
    SplitStep split;
    const JsonField pattern = field.at("pattern");
    pattern.expect_object();
    if (const std::optional<JsonField> regex = pattern.find("Regex")) {
        split.pattern = regex->as_string();
        split.syntax = Regex::Syntax::Pattern;
        split.field = regex->path();
    } else if (const std::optional<JsonField> literal = pattern.find("String")) {
        split.pattern = literal->as_string();
        split.syntax = Regex::Syntax::Literal;
        split.field = literal->path();
    } else {
        pattern.fail("expected {\"Regex\": ...} or {\"String\": ...}");
    }
    split.behavior = parse_behavior(field.at("behavior"));
    split.invert = field.bool_or("invert", false);
    return split;
}

void parse_pre_tokenizer(const JsonField& field, std::vector<PreTokenizerStep>& steps,
                         int depth = 0) {
    check_nesting(field, depth);
    const std::string type = field.at("type").as_string();
    if (type == "Split") {
        steps.emplace_back(parse_split(field));
    } else if (type == "ByteLevel") {
        ByteLevelStep byte_level;
        byte_level.add_prefix_space = field.bool_or("add_prefix_space", true);
        byte_level.use_regex = field.bool_or("use_regex", true);
        steps.emplace_back(byte_level);
    } else if (type == "Sequence") {
        const JsonField children = field.at("pretokenizers");
        for (size_t index = 0; index < children.array_size(); ++index) {
            parse_pre_tokenizer(children.at(index), steps, depth + 1);
        }
    } else {
        field.at("type").unsupported("pre-tokenizer '" + type +
                                     "' is not supported (Split, ByteLevel, Sequence)");
    }
}

// Merges are either ["a b", ...] (older files) or [["a", "b"], ...].
void parse_merges(const JsonField& field,
                  std::vector<std::pair<std::string, std::string>>& merges) {
    const size_t n_merges = field.array_size();
    merges.reserve(n_merges);
    for (size_t index = 0; index < n_merges; ++index) {
        const JsonField merge = field.at(index);
        if (merge.value().is_string()) {
            const std::string line = merge.as_string();
            // tokenizers' convert_merges_to_hashmap skips "#version" lines and needs one space.
            if (line.rfind("#version", 0) == 0) continue;
            const size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
                merge.fail("expected two tokens separated by one space, got '" + line + "'");
            }
            merges.emplace_back(line.substr(0, space), line.substr(space + 1));
        } else if (merge.value().is_array()) {
            if (merge.array_size() != 2) merge.fail("expected a pair of tokens");
            merges.emplace_back(merge.at(size_t{0}).as_string(), merge.at(size_t{1}).as_string());
        } else {
            merge.fail("expected \"a b\" or [\"a\", \"b\"]");
        }
    }
}

BpeSpec parse_model(const JsonField& field) {
    field.expect_object();
    const std::optional<JsonField> type = field.find("type");
    if (type && type->as_string() != "BPE") {
        type->unsupported("model '" + type->as_string() + "' is not supported (only BPE)");
    }
    BpeSpec spec;
    const JsonField vocab = field.at("vocab");
    vocab.expect_object();
    spec.vocab.reserve(vocab.value().size());
    for (const auto& [token, id] : vocab.value().items()) {
        spec.vocab.emplace_back(token, JsonField(id, vocab.path() + "['" + token + "']").as_int());
    }
    parse_merges(field.at("merges"), spec.merges);
    if (const std::optional<JsonField> dropout = field.find("dropout")) {
        if (!dropout->value().is_number() || dropout->value().get<double>() != 0.0) {
            dropout->unsupported("BPE dropout is random; only null or 0 is supported");
        }
    }
    spec.unk_token = field.optional_string("unk_token");
    spec.continuing_subword_prefix =
        field.optional_string("continuing_subword_prefix").value_or("");
    spec.end_of_word_suffix = field.optional_string("end_of_word_suffix").value_or("");
    spec.fuse_unk = field.bool_or("fuse_unk", false);
    spec.byte_fallback = field.bool_or("byte_fallback", false);
    spec.ignore_merges = field.bool_or("ignore_merges", false);
    spec.vocab_field = vocab.path();
    spec.merges_field = field.path() + ".merges";
    return spec;
}

AddedTokenSpec parse_added_token(const JsonField& field) {
    AddedTokenSpec token;
    token.declared_id = field.at("id").as_int();
    token.content = field.at("content").as_string();
    token.single_word = field.bool_or("single_word", false);
    token.lstrip = field.bool_or("lstrip", false);
    token.rstrip = field.bool_or("rstrip", false);
    token.normalized = field.bool_or("normalized", true);
    token.special = field.bool_or("special", false);
    token.field = field.path();
    return token;
}

DecoderKind parse_decoder(const JsonField& field) {
    const std::string type = field.at("type").as_string();
    if (type == "ByteLevel") return DecoderKind::ByteLevel;
    field.at("type").unsupported("decoder '" + type + "' is not supported (only ByteLevel)");
}

}  // namespace

TokenizerSpec parse_tokenizer_json(std::string_view text) {
    const nlohmann::json document = JsonField::parse(text);
    const JsonField root(document, "");
    root.expect_object();
    if (const std::optional<std::string> version = root.optional_string("version")) {
        if (*version != "1.0")
            root.at("version").unsupported("version '" + *version + "' (expected 1.0)");
    }
    TokenizerSpec spec;
    spec.model = parse_model(root.at("model"));
    if (const std::optional<JsonField> normalizer = root.find("normalizer")) {
        parse_normalizer(*normalizer, spec.normalizer);
    }
    if (const std::optional<JsonField> pre_tokenizer = root.find("pre_tokenizer")) {
        parse_pre_tokenizer(*pre_tokenizer, spec.pre_tokenizer);
        // Steps run recursively, one stack frame each.
        if (spec.pre_tokenizer.size() > kMaxPreTokenizerSteps) {
            pre_tokenizer->fail("more than " + std::to_string(kMaxPreTokenizerSteps) + " steps");
        }
    }
    if (const std::optional<JsonField> decoder = root.find("decoder")) {
        spec.decoder = parse_decoder(*decoder);
    }
    if (const std::optional<JsonField> added = root.find("added_tokens")) {
        for (size_t index = 0; index < added->array_size(); ++index) {
            spec.added_tokens.push_back(parse_added_token(added->at(index)));
        }
    }
    return spec;
}

}  // namespace cherenkov::text
