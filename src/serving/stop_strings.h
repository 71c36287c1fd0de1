// Stop strings over streamed text (OpenAI's `stop`): the text is cut before the first match, also
// when a match spans several tokens. Text that could still be the start of a match is held back
// until the next piece decides it, so a stream never shows bytes a later match removes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cherenkov::serving {

class StopStrings {
public:
    explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

    // Adds generated text; returns what is now safe to release. After a match, matched() is
    // true and later pushes return nothing.
    std::string push(std::string_view text);
    // Generation ended without a match: releases the held-back text.
    std::string finish();

    bool matched() const { return matched_; }
    // The stop string that matched (the first given among those matching at the cut); empty
    // before a match.
    const std::string& matched_stop() const { return matched_stop_; }

private:
    std::vector<std::string> stops_;
    std::string held_;  // released text never contains a match; this tail might start one
    bool matched_ = false;
    std::string matched_stop_;
};

}  // namespace cherenkov::serving
