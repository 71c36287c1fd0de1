// The `cherenkov prepare ...` commands that error messages suggest, written so that pasting one
// into a shell does what the message says: the model named as the user named it (an explicit
// selector, never the empty one that selects the default checkpoint), arguments quoted for a
// POSIX shell, and --root repeated when the index is not the default one.
#pragma once

#include <string>
#include <string_view>

#include "store/index/index_options.h"

namespace cherenkov::store {

// `text` as one shell word: unchanged when it holds only characters no shell treats specially,
// else in single quotes.
std::string shell_quote(std::string_view text);

// "cherenkov ARGUMENTS [--root DATA]": `arguments` already quoted (shell_quote).
std::string index_command(const std::string& arguments, const IndexOptions& options);

// "cherenkov prepare SELECTOR [FLAGS] [--root DATA]". An empty selector is written as the default
// checkpoint's URI. `flags` (e.g. "--experts 3") is appended as given.
std::string prepare_command(const std::string& selector, const std::string& flags,
                            const IndexOptions& options);

}  // namespace cherenkov::store
