// Where a Hugging Face token comes from (docs/formats.md §5.1): --hf-token, then HF_TOKEN, then
// HUGGING_FACE_HUB_TOKEN, then the file at HF_TOKEN_PATH, else $HF_HOME/token (HF_HOME defaults
// to $XDG_CACHE_HOME/huggingface, else ~/.cache/huggingface). The token is only ever sent as a
// bearer header; it is never stored, logged or put in a message.
#pragma once

#include <string>

namespace cherenkov::model_data::hub {

// The environment variables the lookup reads, captured once at the edge (empty = unset).
struct TokenEnvironment {
    std::string hf_token;                // HF_TOKEN
    std::string hugging_face_hub_token;  // HUGGING_FACE_HUB_TOKEN (legacy)
    std::string hf_token_path;           // HF_TOKEN_PATH
    std::string hf_home;                 // HF_HOME
    std::string xdg_cache_home;          // XDG_CACHE_HOME
    std::string home;                    // HOME

    static TokenEnvironment from_process();
};

// Whitespace and CR/LF around the token are removed; an empty result means "no token".
// A missing token file is not an error; an unreadable one throws Io naming the file.
std::string resolve_token(const std::string& explicit_token, const TokenEnvironment& env);

}  // namespace cherenkov::model_data::hub
