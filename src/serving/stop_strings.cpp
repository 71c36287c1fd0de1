#include "serving/stop_strings.h"

#include <algorithm>

namespace cherenkov::serving {

std::string StopStrings::push(std::string_view text) {
    if (matched_) return {};
    held_.append(text);
    // The earliest match wins; among matches at one place, any cuts the same text.
    size_t cut = std::string::npos;
    const std::string* first = nullptr;
    for (const std::string& stop : stops_) {
        const size_t at = held_.find(stop);
        if (at < cut) {
            cut = at;
            first = &stop;
        }
    }
    if (cut != std::string::npos) {
        matched_ = true;
        matched_stop_ = *first;
        std::string out = held_.substr(0, cut);
        held_.clear();
        return out;
    }
    // Keep the longest tail that is a proper prefix of some stop string.
    size_t keep = 0;
    for (const std::string& stop : stops_) {
        const size_t most = std::min(stop.size() - 1, held_.size());
        for (size_t n = most; n > keep; --n) {
            if (std::string_view(held_).substr(held_.size() - n) ==
                std::string_view(stop).substr(0, n)) {
                keep = n;
                break;
            }
        }
    }
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StopStrings::finish() {
    std::string out;
    if (!matched_) out.swap(held_);
    held_.clear();
    return out;
}

}  // namespace cherenkov::serving
