// `cherenkov dash [--socket PATH]`: the terminal dashboard (docs/monitoring.md "dash"). Once a
// second it asks the server for stats_summary and one page of layers; between refreshes it
// handles keys. A server that stops answering leaves the last values marked stale and gaps in
// the charts, and the dashboard keeps retrying. q quits and restores the terminal.
#include <curses.h>
#include <unistd.h>

#include <chrono>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/dash/dash_screen.h"
#include "cli/monitor_text.h"

namespace cherenkov::cli {
namespace {

using Clock = std::chrono::steady_clock;

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// Asks for the summary and the visible page of layers; on failure marks the state stale.
void refresh_stats(dash::DashState& state, int rows) {
    try {
        nlohmann::json summary =
            control_call(state.socket, {{"op", "stats_summary"}}, std::chrono::seconds(2));
        const uint64_t n_layers = field(summary, "n_layers").is_number_unsigned()
                                      ? summary["n_layers"].get<uint64_t>()
                                      : 0;
        if (n_layers > 0) {
            state.selected = std::min(state.selected, n_layers - 1);
            // Keep the selected row on the page.
            const auto visible = static_cast<uint64_t>(std::clamp(rows, 1, 128));
            if (state.selected < state.scroll) state.scroll = state.selected;
            if (state.selected >= state.scroll + visible)
                state.scroll = state.selected + 1 - visible;
            state.layers =
                control_call(state.socket,
                             {{"op", "stats_layers"}, {"offset", state.scroll}, {"limit", visible}},
                             std::chrono::seconds(2));
        }
        state.history.observe(dash::summary_totals(summary));
        state.summary = std::move(summary);
        state.connected = true;
        state.ever_connected = true;
        state.problem.clear();
        state.stale_since = unix_now();
    } catch (const Error& e) {
        state.connected = false;
        state.problem = e.kind() == ErrorKind::Busy ? "the server is loading the model" : e.what();
        state.history.gap();
    }
}

int run_dash(const std::string& socket) {
    if (::isatty(STDOUT_FILENO) != 1 || ::isatty(STDIN_FILENO) != 1)
        throw_invalid("dash needs a terminal (stdin and stdout); use `cherenkov stats` in scripts");
    dash::DashState state;
    state.socket = socket;
    dash::DashScreen screen;
    Clock::time_point next_refresh = Clock::now();
    for (;;) {
        if (Clock::now() >= next_refresh) {
            refresh_stats(state, screen.layer_rows(state));
            next_refresh = Clock::now() + std::chrono::seconds(1);
            screen.draw(state);
        }
        const int key = screen.key(100);
        if (key == -1) continue;
        const uint64_t page = static_cast<uint64_t>(std::max(1, screen.layer_rows(state)));
        switch (key) {
            case 'q':
            case 'Q': return 0;
            case '\t':
                state.focus =
                    static_cast<dash::Pane>((static_cast<int>(state.focus) + 1) % dash::kPanes);
                break;
            case KEY_BTAB:
                state.focus = static_cast<dash::Pane>(
                    (static_cast<int>(state.focus) + dash::kPanes - 1) % dash::kPanes);
                break;
            case KEY_DOWN:
            case 'j': ++state.selected; break;
            case KEY_UP:
            case 'k':
                if (state.selected > 0) --state.selected;
                break;
            case KEY_NPAGE: state.selected += page; break;
            case KEY_PPAGE: state.selected -= std::min(state.selected, page); break;
            case KEY_RESIZE: break;
            default: continue;
        }
        // A selection or pane change refreshes the page at once.
        next_refresh = Clock::now();
    }
}

}  // namespace

Command register_dash(CLI::App& parent) {
    auto socket = std::make_shared<std::string>();
    CLI::App* app = parent.add_subcommand(
        "dash",
        "Terminal dashboard of the running server (expert reads, layers), over its "
        "control socket");
    app->add_option("--socket", *socket,
                    "The server's control socket (default $TMPDIR/cherenkov-UID/control.sock)");
    return {app, [socket]() { return run_dash(socket_or_default(*socket)); }};
}

}  // namespace cherenkov::cli
