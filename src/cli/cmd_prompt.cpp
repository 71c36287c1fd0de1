// `cherenkov prompt MODEL --messages FILE [--tools FILE] [--tokens]` renders a conversation
// through the checkpoint's chat template and prints the prompt exactly (no newline added), or
// with --tokens its token ids as a JSON array. MODEL is a directory holding the tokenizer and
// template files (chat_template.jinja or tokenizer_config.json), or any model selector.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "base/file.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "text/chat_message.h"
#include "text/chat_template.h"
#include "text/tokenizer/tokenizer.h"
#include "text/tool_calls/tool_spec.h"

namespace cherenkov::cli {
namespace {

nlohmann::ordered_json read_json_file(const std::string& path) {
    std::string text = read_text_file(path);
    try {
        return nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::ordered_json::exception& e) {
        throw_invalid(path + ": not valid JSON: " + e.what());
    }
}

struct PromptOptions {
    std::string model;
    std::string messages_path;
    std::string tools_path;
    bool tokens = false;
    bool no_generation_prompt = false;
    bool enable_thinking = false;
};

int run_prompt(const PromptOptions& options) {
    const std::string text_dir = text_files_dir(options.model);
    const text::ChatTemplate chat_template = text::ChatTemplate::load_directory(text_dir);
    std::vector<text::ChatMessage> messages;
    try {
        messages = text::parse_messages(read_json_file(options.messages_path));
    } catch (const Error& e) {
        throw e.with_context(options.messages_path);
    }
    nlohmann::ordered_json tools;
    if (!options.tools_path.empty()) {
        tools = read_json_file(options.tools_path);
        // The server's rules for a request's tools (seed "Tool calling"): function tools with
        // names of [A-Za-z0-9_-]{1,64}, object parameter schemas, no strict, no duplicates.
        // The template renders the definitions as given, as the server does.
        try {
            text::parse_tools(tools);
        } catch (const Error& e) {
            throw e.with_context(options.tools_path);
        }
    }
    text::RenderOptions render_options;
    render_options.add_generation_prompt = !options.no_generation_prompt;
    render_options.enable_thinking = options.enable_thinking;
    const std::string prompt = chat_template.render(messages, tools, render_options);
    if (!options.tokens) {
        std::cout << prompt;
        std::cout.flush();
        return 0;
    }
    const text::Tokenizer tokenizer = text::Tokenizer::load_directory(text_dir);
    std::cout << nlohmann::json(tokenizer.encode(prompt, true)).dump() << '\n';
    std::cout.flush();
    return 0;
}

}  // namespace

Command register_prompt(CLI::App& parent) {
    auto options = std::make_shared<PromptOptions>();
    CLI::App* app =
        parent.add_subcommand("prompt", "Render messages through the checkpoint's chat template");
    app->add_option(
           "model", options->model,
           "Directory holding chat_template.jinja or tokenizer_config.json, or any model selector")
        ->required();
    app->add_option("--messages", options->messages_path,
                    "JSON file with the list of OpenAI-style messages")
        ->required();
    app->add_option("--tools", options->tools_path, "JSON file with the list of tool definitions");
    app->add_flag("--tokens", options->tokens,
                  "Print the prompt's token ids (a JSON array) instead of its text");
    app->add_flag("--no-generation-prompt", options->no_generation_prompt,
                  "Render with add_generation_prompt=false (default true)");
    app->add_flag("--enable-thinking", options->enable_thinking,
                  "Render with enable_thinking=true (default false)");
    return {app, [options]() { return run_prompt(*options); }};
}

}  // namespace cherenkov::cli
