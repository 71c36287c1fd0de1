// Building a Tokenizer from files: tokenizer.json first, else vocab.json + merges.txt; each
// error carries the file it came from.
#include <filesystem>

#include "base/error.h"
#include "base/file.h"
#include "text/tokenizer/tokenizer_impl.h"

namespace cherenkov::text {
namespace {

template <typename Function>
auto with_file_context(const std::string& name, Function&& function) {
    try {
        return function();
    } catch (const Error& e) {
        throw e.with_context(name);
    }
}

std::optional<int32_t> resolve_token(const Tokenizer::Impl& impl,
                                     const std::optional<std::string>& name, const char* field) {
    if (!name) return std::nullopt;
    if (std::optional<int32_t> id = impl.added.token_id(*name)) return id;
    if (std::optional<int32_t> id = impl.model.token_id(*name)) return id;
    throw_corrupt(std::string(field) + ": '" + *name + "' is not in the vocabulary");
}

// transformers adds the config's tokens whose ids the tokenizer lacks, in runs of equal
// special-ness (one add_tokens call per run).
void add_config_tokens(Tokenizer::Impl& impl, const TokenizerConfigSpec& config) {
    std::vector<AddedTokenSpec> run;
    auto flush = [&] {
        if (!run.empty()) impl.added.add_tokens(run, impl.model, impl.normalizer);
        run.clear();
    };
    for (const AddedTokenSpec& token : config.added_tokens) {
        const int64_t id = *token.declared_id;
        if (id >= 0 && id < kMaxTokenId && impl.added.token(static_cast<int32_t>(id)) != nullptr) {
            continue;
        }
        if (!run.empty() && run.back().special != token.special) flush();
        run.push_back(token);
    }
    flush();
}

}  // namespace

Tokenizer::Impl::Impl(TokenizerSpec spec, const std::optional<TokenizerConfigSpec>& config,
                      const std::string& json_name, const std::string& config_name) {
    with_file_context(json_name, [&] {
        normalizer = Normalizer(spec.normalizer);
        pre_tokenizer = PreTokenizer(std::move(spec.pre_tokenizer));
        model = BpeModel(std::move(spec.model));
        added.add_tokens(spec.added_tokens, model, normalizer);
        return 0;
    });
    if (config) {
        with_file_context(config_name, [&] {
            add_config_tokens(*this, *config);
            return 0;
        });
    }
    with_file_context(json_name, [&] {
        added.finalize();
        decode_table = DecodeTable(spec.decoder, model, added);
        return 0;
    });
    if (config) {
        with_file_context(config_name, [&] {
            eos_id = resolve_token(*this, config->eos_token, "eos_token");
            pad_id = resolve_token(*this, config->pad_token, "pad_token");
            return 0;
        });
    }
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json,
                               std::optional<std::string_view> tokenizer_config_json,
                               const std::string& name) {
    const std::string config_name = "tokenizer_config.json of " + name;
    TokenizerSpec spec =
        with_file_context(name, [&] { return parse_tokenizer_json(tokenizer_json); });
    std::optional<TokenizerConfigSpec> config;
    if (tokenizer_config_json) {
        config = with_file_context(config_name,
                                   [&] { return parse_tokenizer_config(*tokenizer_config_json); });
    }
    return Tokenizer(std::make_shared<const Impl>(std::move(spec), config, name, config_name));
}

Tokenizer Tokenizer::load_directory(const std::string& dir) {
    namespace fs = std::filesystem;
    const fs::path root(dir);
    const std::string json_path = (root / "tokenizer.json").string();
    const std::string config_path = (root / "tokenizer_config.json").string();
    std::optional<std::string> config_text;
    if (fs::is_regular_file(config_path)) config_text = read_text_file(config_path);
    if (fs::is_regular_file(json_path)) {
        const std::string json_text = read_text_file(json_path);
        TokenizerSpec spec =
            with_file_context(json_path, [&] { return parse_tokenizer_json(json_text); });
        std::optional<TokenizerConfigSpec> config;
        if (config_text) {
            config = with_file_context(config_path,
                                       [&] { return parse_tokenizer_config(*config_text); });
        }
        return Tokenizer(
            std::make_shared<const Impl>(std::move(spec), config, json_path, config_path));
    }
    const std::string vocab_path = (root / "vocab.json").string();
    const std::string merges_path = (root / "merges.txt").string();
    if (!fs::is_regular_file(vocab_path) || !fs::is_regular_file(merges_path)) {
        throw_not_found(dir + ": no tokenizer.json, nor vocab.json + merges.txt");
    }
    TokenizerConfigSpec config;
    if (config_text) {
        config =
            with_file_context(config_path, [&] { return parse_tokenizer_config(*config_text); });
    }
    const std::string vocab_text = read_text_file(vocab_path);
    const std::string merges_text = read_text_file(merges_path);
    TokenizerSpec spec = with_file_context(
        dir, [&] { return spec_from_vocab_and_merges(vocab_text, merges_text, config); });
    return Tokenizer(std::make_shared<const Impl>(std::move(spec), config, dir, config_path));
}

}  // namespace cherenkov::text
