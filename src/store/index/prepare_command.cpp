#include "store/index/prepare_command.h"

#include <algorithm>
#include <cctype>

#include "store/index/storage_paths.h"

namespace cherenkov::store {

std::string shell_quote(std::string_view text) {
    const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0 ||
               std::string_view("@%+=:,./_-").find(c) != std::string_view::npos;
    });
    if (plain) return std::string(text);
    std::string quoted = "'";
    for (char c : text) {
        if (c == '\'') {
            quoted += "'\\''";
        } else {
            quoted.push_back(c);
        }
    }
    return quoted + "'";
}

std::string index_command(const std::string& arguments, const IndexOptions& options) {
    std::string command = "cherenkov " + arguments;
    // The data directory resolved from --root is absolute, so the command works from any
    // directory.
    if (!options.root.empty()) command += " --root " + shell_quote(options.paths.data);
    return command;
}

std::string prepare_command(const std::string& selector, const std::string& flags,
                            const IndexOptions& options) {
    std::string arguments =
        "prepare " + shell_quote(selector.empty() ? default_model_reference() : selector);
    if (!flags.empty()) arguments += " " + flags;
    return index_command(arguments, options);
}

}  // namespace cherenkov::store
