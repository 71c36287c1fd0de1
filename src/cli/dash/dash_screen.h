// The dashboard's terminal (ncurses): owns curses mode for its lifetime, so the terminal is
// restored however the dashboard ends, and draws one frame from the dashboard's state.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "cli/dash/dash_history.h"

namespace cherenkov::cli::dash {

enum class Pane { Overview, Layers, Detail };
inline constexpr int kPanes = 3;

struct DashState {
    std::string socket;
    bool connected = false;  // the last request was answered
    bool ever_connected = false;
    std::string problem;       // why the last request failed (stale), or "loading"
    double stale_since = 0.0;  // Unix seconds of the last good answer
    nlohmann::json summary;    // the last stats_summary answered (null before one)
    nlohmann::json layers;     // the last stats_layers page
    DashHistory history;
    Pane focus = Pane::Overview;
    uint64_t selected = 0;  // layer
    uint64_t scroll = 0;    // first layer on the page
};

class DashScreen {
public:
    DashScreen();   // enters curses mode
    ~DashScreen();  // leaves it, whatever happened
    DashScreen(const DashScreen&) = delete;
    DashScreen& operator=(const DashScreen&) = delete;

    // Rows available to the layer table at the current size (so the caller asks for that many).
    int layer_rows(const DashState& state) const;
    void draw(const DashState& state);
    // A key within `timeout_ms`, or -1.
    int key(int timeout_ms);

private:
    bool small() const;
};

}  // namespace cherenkov::cli::dash
