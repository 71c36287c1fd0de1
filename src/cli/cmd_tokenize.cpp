// `cherenkov tokenize MODEL TEXT [--json] [--no-special]` prints token ids and pieces;
// `cherenkov detokenize MODEL IDS` prints the text of ids. MODEL is a directory holding the
// tokenizer files or any model selector (docs/model-index.md). Both take `--batch-jsonl FILE` for many inputs in one run: tokenize reads one
// JSON string per line and writes one JSON array of ids per line; detokenize reads one JSON array
// of ids per line and writes one JSON string per line.
#include <charconv>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tokenizer/utf8.h"

namespace cherenkov::cli {
namespace {

using text::Tokenizer;

// A token's bytes as readable text: valid printable UTF-8 as is, control characters and bytes
// of incomplete characters escaped (\n, \t, \r, \\, \xNN).
std::string readable(std::string_view bytes) {
    std::string out;
    size_t offset = 0;
    while (offset < bytes.size()) {
        const auto byte = static_cast<uint8_t>(bytes[offset]);
        if (byte == '\n') {
            out += "\\n";
        } else if (byte == '\t') {
            out += "\\t";
        } else if (byte == '\r') {
            out += "\\r";
        } else if (byte == '\\') {
            out += "\\\\";
        } else if (byte < 0x20 || byte == 0x7F) {
            char escaped[8];
            std::snprintf(escaped, sizeof(escaped), "\\x%02X", byte);
            out += escaped;
        } else if (byte < 0x80) {
            out.push_back(static_cast<char>(byte));
        } else {
            // Keep a whole character only when all of it is here and well-formed.
            const size_t length = text::utf8_sequence_length(byte);
            if (length > 1 && offset + length <= bytes.size() &&
                text::find_invalid_utf8(bytes.substr(offset, length)) == text::kValidUtf8) {
                out.append(bytes.substr(offset, length));
                offset += length;
                continue;
            }
            char escaped[8];
            std::snprintf(escaped, sizeof(escaped), "\\x%02X", byte);
            out += escaped;
        }
        ++offset;
    }
    return out;
}

std::ifstream open_batch(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_not_found(path + ": cannot open batch file");
    return in;
}

nlohmann::json parse_batch_line(const std::string& path, size_t line_number,
                                const std::string& line) {
    try {
        return nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
        throw_invalid(path + ": line " + std::to_string(line_number) + ": " + e.what());
    }
}

int run_tokenize_batch(const Tokenizer& tokenizer, const std::string& path, bool parse_special) {
    std::ifstream in = open_batch(path);
    std::string line;
    size_t line_number = 0;
    while (std::getline(in, line)) {
        ++line_number;
        if (line.empty()) continue;
        const nlohmann::json value = parse_batch_line(path, line_number, line);
        if (!value.is_string()) {
            throw_invalid(path + ": line " + std::to_string(line_number) +
                          ": expected a JSON string");
        }
        try {
            std::cout
                << nlohmann::json(tokenizer.encode(value.get<std::string>(), parse_special)).dump()
                << '\n';
        } catch (const Error& e) {
            throw e.with_context(path + ": line " + std::to_string(line_number));
        }
    }
    std::cout.flush();
    return 0;
}

int run_tokenize(const Tokenizer& tokenizer, const std::string& text, bool json,
                 bool parse_special) {
    const std::vector<int32_t> ids = tokenizer.encode(text, parse_special);
    if (json) {
        nlohmann::json tokens = nlohmann::json::array();
        for (const int32_t id : ids)
            tokens.push_back(std::string(tokenizer.token_text(id).value_or("")));
        const nlohmann::json report = {{"ids", ids}, {"tokens", tokens}};
        std::cout << report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
        std::cout.flush();
        return 0;
    }
    for (size_t index = 0; index < ids.size(); ++index) {
        std::cout << (index == 0 ? "" : " ") << ids[index];
    }
    std::cout << '\n';
    for (const int32_t id : ids) {
        std::cout << id << '\t' << readable(tokenizer.token_bytes(id).value_or("")) << '\n';
    }
    std::cout.flush();
    return 0;
}

// Ids separated by commas and/or whitespace, each checked against the vocabulary.
std::vector<int32_t> parse_ids(const Tokenizer& tokenizer, const std::string& text) {
    std::vector<int32_t> ids;
    size_t offset = 0;
    while (offset < text.size()) {
        const char current = text[offset];
        if (current == ',' || current == ' ' || current == '\t' || current == '\n' ||
            current == '\r') {
            ++offset;
            continue;
        }
        size_t end = offset;
        while (end < text.size() && text.find_first_of(", \t\r\n", end) != end) ++end;
        const std::string word = text.substr(offset, end - offset);
        int64_t id = 0;
        const auto [pointer, error] = std::from_chars(word.data(), word.data() + word.size(), id);
        if (error != std::errc() || pointer != word.data() + word.size()) {
            throw_invalid("'" + word + "' is not a token id");
        }
        if (id < 0 || id > INT32_MAX || !tokenizer.token_text(static_cast<int32_t>(id))) {
            throw_invalid("token id " + word + " is out of range (the vocabulary has " +
                          std::to_string(tokenizer.vocab_size()) + " ids)");
        }
        ids.push_back(static_cast<int32_t>(id));
        offset = end;
    }
    return ids;
}

int run_detokenize_batch(const Tokenizer& tokenizer, const std::string& path, bool skip_special) {
    std::ifstream in = open_batch(path);
    std::string line;
    size_t line_number = 0;
    while (std::getline(in, line)) {
        ++line_number;
        if (line.empty()) continue;
        const nlohmann::json value = parse_batch_line(path, line_number, line);
        const std::string where = path + ": line " + std::to_string(line_number);
        if (!value.is_array()) throw_invalid(where + ": expected a JSON array of ids");
        std::vector<int32_t> ids;
        for (const nlohmann::json& id : value) {
            if (!id.is_number_integer() || id.get<int64_t>() < INT32_MIN ||
                id.get<int64_t>() > INT32_MAX) {
                throw_invalid(where + ": " + id.dump() + " is not a token id");
            }
            ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
        }
        try {
            std::cout << nlohmann::json(tokenizer.decode(ids, skip_special)).dump() << '\n';
        } catch (const Error& e) {
            throw e.with_context(where);
        }
    }
    std::cout.flush();
    return 0;
}

}  // namespace

Command register_tokenize(CLI::App& parent) {
    struct Options {
        std::string model;
        std::string text;
        bool json = false;
        bool no_special = false;
        std::string batch_jsonl;
    };
    auto options = std::make_shared<Options>();
    CLI::App* app = parent.add_subcommand("tokenize", "Print the token ids (and pieces) of a text");
    app->add_option("model", options->model,
                    "Directory holding tokenizer.json or vocab.json + merges.txt, or any model selector")
        ->required();
    app->add_option("text", options->text, "Text to tokenize (UTF-8)");
    app->add_flag("--json", options->json,
                  "Print {\"ids\": [...], \"tokens\": [...vocabulary pieces...]}");
    app->add_flag("--no-special", options->no_special,
                  "Encode special tokens written in the text as plain text");
    app->add_option(
        "--batch-jsonl", options->batch_jsonl,
        "Read one JSON string per line from FILE; print one JSON array of ids per line");
    auto run = [options, app]() {
        const Tokenizer tokenizer = Tokenizer::load_directory(text_files_dir(options->model));
        if (!options->batch_jsonl.empty()) {
            return run_tokenize_batch(tokenizer, options->batch_jsonl, !options->no_special);
        }
        if (app->count("text") == 0) throw_invalid("tokenize: give TEXT or --batch-jsonl FILE");
        return run_tokenize(tokenizer, options->text, options->json, !options->no_special);
    };
    return Command{app, run};
}

Command register_detokenize(CLI::App& parent) {
    struct Options {
        std::string model;
        std::vector<std::string> ids;
        bool skip_special = false;
        bool json = false;
        std::string batch_jsonl;
    };
    auto options = std::make_shared<Options>();
    CLI::App* app = parent.add_subcommand(
        "detokenize", "Print the text of token ids (exactly its bytes, no newline added)");
    app->add_option("model", options->model,
                    "Directory holding tokenizer.json or vocab.json + merges.txt, or any model selector")
        ->required();
    app->add_option("ids", options->ids, "Token ids, separated by commas or spaces");
    app->add_flag("--skip-special", options->skip_special, "Leave out special tokens");
    app->add_flag("--json", options->json, "Print {\"text\": ...}");
    app->add_option(
        "--batch-jsonl", options->batch_jsonl,
        "Read one JSON array of ids per line from FILE; print one JSON string per line");
    auto run = [options]() {
        const Tokenizer tokenizer = Tokenizer::load_directory(text_files_dir(options->model));
        if (!options->batch_jsonl.empty()) {
            return run_detokenize_batch(tokenizer, options->batch_jsonl, options->skip_special);
        }
        std::string joined;
        for (const std::string& part : options->ids) joined += part + " ";
        const std::string text =
            tokenizer.decode(parse_ids(tokenizer, joined), options->skip_special);
        if (options->json) {
            std::cout << nlohmann::json{{"text", text}}.dump() << '\n';
        } else {
            std::cout << text;
        }
        std::cout.flush();
        return 0;
    };
    return Command{app, run};
}

}  // namespace cherenkov::cli
