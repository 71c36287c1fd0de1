#include "model_data/hub/hub_token.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/error.h"

namespace cherenkov::model_data::hub {
namespace {

std::string clean(std::string text) {
    auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
    while (!text.empty() && space(text.back())) text.pop_back();
    size_t first = 0;
    while (first < text.size() && space(text[first])) ++first;
    return text.substr(first);
}

std::string env_or_empty(const char* name) {
    const char* value = std::getenv(name);
    return value == nullptr ? std::string() : std::string(value);
}

std::string token_file_path(const TokenEnvironment& env) {
    if (!env.hf_token_path.empty()) return env.hf_token_path;
    std::string hf_home = env.hf_home;
    if (hf_home.empty()) {
        if (!env.xdg_cache_home.empty()) {
            hf_home = env.xdg_cache_home + "/huggingface";
        } else if (!env.home.empty()) {
            hf_home = env.home + "/.cache/huggingface";
        } else {
            return {};
        }
    }
    return hf_home + "/token";
}

}  // namespace

TokenEnvironment TokenEnvironment::from_process() {
    TokenEnvironment env;
    env.hf_token = env_or_empty("HF_TOKEN");
    env.hugging_face_hub_token = env_or_empty("HUGGING_FACE_HUB_TOKEN");
    env.hf_token_path = env_or_empty("HF_TOKEN_PATH");
    env.hf_home = env_or_empty("HF_HOME");
    env.xdg_cache_home = env_or_empty("XDG_CACHE_HOME");
    env.home = env_or_empty("HOME");
    return env;
}

std::string resolve_token(const std::string& explicit_token, const TokenEnvironment& env) {
    for (const std::string* candidate :
         {&explicit_token, &env.hf_token, &env.hugging_face_hub_token}) {
        std::string token = clean(*candidate);
        if (!token.empty()) return token;
    }
    const std::string path = token_file_path(env);
    if (path.empty()) return {};
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        if (errno == ENOENT || errno == ENOTDIR) return {};
        throw_errno("cannot read the Hugging Face token file " + path, errno);
    }
    std::ostringstream contents;
    contents << in.rdbuf();
    return clean(contents.str());
}

}  // namespace cherenkov::model_data::hub
