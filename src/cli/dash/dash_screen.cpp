#include "cli/dash/dash_screen.h"

#include <curses.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "cli/monitor_text.h"

namespace cherenkov::cli::dash {
namespace {

using Json = nlohmann::json;

constexpr int kChartHeight = 3;
constexpr int kOverviewRows = 1 + 3 * (kChartHeight + 1);  // title + three labelled charts
constexpr int kDetailRows = 9;

enum ColorPair : short { kTitle = 1, kStale = 2, kBar = 3, kFocus = 4 };

uint64_t counter(const Json& object, const char* key) {
    const Json& value = field(object, key);
    return value.is_number_unsigned() ? value.get<uint64_t>() : 0;
}

// `value` with `decimals` digits after the point, then `suffix`.
std::string fixed(double value, int decimals, const char* suffix = "") {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.*f%s", decimals, value, suffix);
    return buf;
}

void put(int row, int column, const std::string& text, int width) {
    if (row < 0 || row >= LINES || width <= 0) return;
    mvaddnstr(row, column, text.c_str(), std::min<int>(width, COLS - column));
}

void pane_title(int row, const std::string& title, bool focused) {
    if (focused) attron(A_REVERSE);
    attron(A_BOLD);
    put(row, 0, " " + title + " " + std::string(static_cast<size_t>(std::max(0, COLS)), ' '), COLS);
    attroff(A_BOLD);
    if (focused) attroff(A_REVERSE);
}

// One chart: columns of '#' scaled to the largest value shown; gaps stay blank.
void chart(int row, const std::string& label, const DashHistory& history,
           const std::function<std::optional<double>(const ChartPoint&)>& value,
           const std::function<std::string(double)>& text) {
    const int left = 14;
    const int width = std::max(0, COLS - left - 1);
    const auto& points = history.points();
    const size_t shown = std::min(points.size(), static_cast<size_t>(width));
    double top = 0.0;
    std::optional<double> latest;
    for (size_t index = points.size() - shown; index < points.size(); ++index) {
        const std::optional<double> v = value(points[index]);
        if (v) top = std::max(top, *v);
        latest = v;
    }
    put(row, 0, label, left);
    put(row + 1, 0, latest ? text(*latest) : "-", left);
    put(row + 2, 0, "max " + text(top), left);
    attron(COLOR_PAIR(kBar));
    for (size_t index = 0; index < shown; ++index) {
        const std::optional<double> v = value(points[points.size() - shown + index]);
        if (!v) continue;
        const int level = top > 0 ? static_cast<int>(std::ceil(*v / top * kChartHeight)) : 0;
        for (int step = 0; step < level; ++step)
            mvaddch(row + kChartHeight - 1 - step, left + static_cast<int>(index), '#');
    }
    attroff(COLOR_PAIR(kBar));
}

void draw_overview(int row, const DashState& state) {
    const DashHistory& history = state.history;
    chart(
        row, "read MB/s", history, [](const ChartPoint& p) { return p.read_bytes_per_second; },
        [](double v) { return fixed(v / 1e6, 2); });
    chart(
        row + kChartHeight + 1, "read wait s/s", history,
        [](const ChartPoint& p) { return p.read_wait_per_second; },
        [](double v) { return fixed(v, 3); });
    chart(
        row + 2 * (kChartHeight + 1), "gpu coverage", history,
        [](const ChartPoint& p) { return p.gpu_stage_fraction; },
        [](double v) { return fixed(v * 100.0, 1, "%"); });
}

std::pair<uint64_t, uint64_t> reads_of(const Json& layer) {
    uint64_t reads = 0;
    uint64_t bytes = 0;
    for (const Json& quant : field(layer, "quant")) {
        for (const char* kind : {"demand", "prefetch"}) {
            reads += counter(field(quant, kind), "reads_ok") +
                     counter(field(quant, kind), "reads_failed");
            bytes += counter(field(quant, kind), "completed_bytes");
        }
    }
    return {reads, bytes};
}

void draw_layers(int row, int rows, const DashState& state) {
    put(row, 0,
        std::string(
            "layer  selections       hits     misses   hit%  prefetch      reads  read bytes"),
        COLS);
    const Json& entries = field(state.layers, "layers");
    uint64_t page_top = 1;
    for (const Json& entry : entries) page_top = std::max(page_top, reads_of(entry).second);
    int line = row + 1;
    for (const Json& entry : entries) {
        if (line >= row + rows) break;
        const uint64_t layer = counter(entry, "layer");
        const auto [reads, bytes] = reads_of(entry);
        char text[160];
        std::snprintf(text, sizeof text, "%5llu %11llu %10llu %10llu %6s %9llu %10llu %11s ",
                      static_cast<unsigned long long>(layer),
                      static_cast<unsigned long long>(counter(entry, "selections")),
                      static_cast<unsigned long long>(counter(entry, "hits")),
                      static_cast<unsigned long long>(counter(entry, "misses")),
                      percent_text(counter(entry, "hits"), counter(entry, "selections")).c_str(),
                      static_cast<unsigned long long>(counter(entry, "prefetches_issued")),
                      static_cast<unsigned long long>(reads), bytes_text(bytes).c_str());
        const bool selected = layer == state.selected;
        if (selected) attron(A_REVERSE);
        put(line, 0, text, COLS);
        if (selected) attroff(A_REVERSE);
        // Read-volume bar, scaled to the page's largest.
        const int room = COLS - static_cast<int>(std::string(text).size()) - 1;
        if (room > 0) {
            const int bar =
                static_cast<int>(static_cast<double>(bytes) / static_cast<double>(page_top) * room);
            attron(COLOR_PAIR(kBar));
            put(line, static_cast<int>(std::string(text).size()),
                std::string(static_cast<size_t>(bar), '='), room);
            attroff(COLOR_PAIR(kBar));
        }
        ++line;
    }
}

void draw_detail(int row, int rows, const DashState& state) {
    const Json* layer = nullptr;
    for (const Json& entry : field(state.layers, "layers")) {
        if (counter(entry, "layer") == state.selected) layer = &entry;
    }
    if (layer == nullptr) {
        put(row, 0, "layer " + std::to_string(state.selected) + ": not on this page", COLS);
        return;
    }
    const Json& prediction = field(*layer, "prediction");
    put(row, 0,
        "layer " + std::to_string(state.selected) + "  batches " +
            std::to_string(counter(*layer, "batches")) + "  prefetches used " +
            std::to_string(counter(*layer, "prefetches_used")) + "  cuts " +
            std::to_string(counter(*layer, "cuts")),
        COLS);
    put(row + 1, 0,
        "prediction: recall " + value_text(field(prediction, "recall")) + "  precision " +
            value_text(field(prediction, "precision")) + "  over " +
            std::to_string(counter(prediction, "fetches")) + " fetches",
        COLS);
    put(row + 2, 0, "bits  kind      requested   completed     ok  failed   read ms  max ms", COLS);
    int line = row + 3;
    for (const Json& quant : field(*layer, "quant")) {
        for (const char* kind : {"demand", "prefetch"}) {
            if (line >= row + rows) return;
            const Json& r = field(quant, kind);
            char text[160];
            std::snprintf(text, sizeof text, "Q%-3llu %-9s %10s %11s %6llu %7llu %9.1f %7.1f",
                          static_cast<unsigned long long>(counter(quant, "bits")), kind,
                          bytes_text(counter(r, "requested_bytes")).c_str(),
                          bytes_text(counter(r, "completed_bytes")).c_str(),
                          static_cast<unsigned long long>(counter(r, "reads_ok")),
                          static_cast<unsigned long long>(counter(r, "reads_failed")),
                          static_cast<double>(counter(r, "read_ns_sum")) / 1e6,
                          static_cast<double>(counter(r, "read_ns_max")) / 1e6);
            put(line++, 0, text, COLS);
        }
    }
}

void draw_header(const DashState& state) {
    std::string status;
    if (state.connected) {
        status = "live";
    } else if (!state.ever_connected) {
        status = "connecting: " + state.problem;
    } else {
        status = "STALE since " + time_text(state.stale_since) + ": " + state.problem;
    }
    const Json& summary = state.summary;
    const Json& requests = field(summary, "requests");
    std::string line = "cherenkov dash  " + status;
    if (!summary.is_null()) {
        line += "  |  " + value_text(field(summary, "backend")) + ", up " +
                fixed(field(summary, "uptime_seconds").is_number()
                          ? summary["uptime_seconds"].get<double>()
                          : 0.0,
                      0, " s") +
                ", requests " + value_text(field(requests, "active")) + " running " +
                value_text(field(requests, "queued")) + " queued, " +
                value_text(field(requests, "generated_tokens")) + " tokens generated, hit rate " +
                value_text(field(summary, "hit_rate"));
    }
    attron(COLOR_PAIR(state.connected ? kTitle : kStale) | A_BOLD);
    put(0, 0, line + std::string(static_cast<size_t>(std::max(0, COLS)), ' '), COLS);
    attroff(COLOR_PAIR(state.connected ? kTitle : kStale) | A_BOLD);
    put(LINES - 1, 0, "q quit  Tab next pane  Up/Down select layer  PgUp/PgDn page", COLS);
}

}  // namespace

DashScreen::DashScreen() {
    // The size comes from the terminal, never from LINES/COLUMNS in the environment, which would
    // pin it and hide resizes.
    use_env(FALSE);
    initscr();
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    if (has_colors()) {
        start_color();
        use_default_colors();
        init_pair(kTitle, COLOR_GREEN, -1);
        init_pair(kStale, COLOR_RED, -1);
        init_pair(kBar, COLOR_CYAN, -1);
        init_pair(kFocus, COLOR_YELLOW, -1);
    }
}

DashScreen::~DashScreen() {
    endwin();
}

bool DashScreen::small() const {
    return LINES < kOverviewRows + kDetailRows + 10 || COLS < 60;
}

int DashScreen::layer_rows(const DashState& state) const {
    if (small()) return state.focus == Pane::Layers ? std::max(1, LINES - 4) : 1;
    return std::max(1, LINES - kOverviewRows - kDetailRows - 6);
}

void DashScreen::draw(const DashState& state) {
    erase();
    draw_header(state);
    if (small()) {
        // Only the focused pane fits; Tab reaches the others.
        const int rows = LINES - 3;
        switch (state.focus) {
            case Pane::Overview:
                pane_title(1, "Overview (Tab: layers, detail)", true);
                draw_overview(2, state);
                break;
            case Pane::Layers:
                pane_title(1, "Layers (Tab: detail, overview)", true);
                draw_layers(2, rows, state);
                break;
            case Pane::Detail:
                pane_title(1, "Detail (Tab: overview, layers)", true);
                draw_detail(2, rows, state);
                break;
        }
    } else {
        int row = 1;
        pane_title(row++, "Overview: expert reads, read waits, GPU stage coverage (2 min)",
                   state.focus == Pane::Overview);
        draw_overview(row, state);
        row += kOverviewRows - 1;
        const int table_rows = layer_rows(state) + 1;
        pane_title(row++, "Layers (totals since load)", state.focus == Pane::Layers);
        draw_layers(row, table_rows, state);
        row += table_rows;
        pane_title(row++, "Detail", state.focus == Pane::Detail);
        draw_detail(row, kDetailRows, state);
    }
    refresh();
}

int DashScreen::key(int timeout_ms) {
    timeout(timeout_ms);
    const int pressed = getch();
    if (pressed != ERR && pressed != KEY_RESIZE)
        return pressed;  // a resize waits for the next call
    // A resize is also noticed by asking the terminal: curses reports KEY_RESIZE only when its
    // SIGWINCH handler sees the signal during a read, which a waiting dashboard can miss.
    winsize size{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_row > 0 && size.ws_col > 0 &&
        (size.ws_row != LINES || size.ws_col != COLS)) {
        resizeterm(size.ws_row, size.ws_col);
        return KEY_RESIZE;
    }
    return pressed;
}

}  // namespace cherenkov::cli::dash
