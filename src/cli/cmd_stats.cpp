// `cherenkov stats summary|layers|experts LAYER [--offset N] [--limit N] [--json]`: the running
// server's statistics over its control socket (docs/monitoring.md "Statistics"); it loads no
// model. Tables show selections, hits, misses, prefetches and reads; --json prints the whole
// answer with integer counters and every nested object.
#include <iostream>

#include "cli/commands.h"
#include "cli/flag_range.h"
#include "cli/monitor_text.h"

namespace cherenkov::cli {
namespace {

using Json = nlohmann::json;

struct StatsOptions {
    std::string socket;
    bool json = false;
    uint64_t offset = 0;
    uint32_t limit = 64;
    uint32_t layer = 0;
};

uint64_t count(const Json& object, const char* key) {
    const Json& value = field(object, key);
    return value.is_number_unsigned() ? value.get<uint64_t>() : 0;
}

// Requested reads and bytes of a layer or total entry: demand and prefetch, every precision.
std::pair<uint64_t, uint64_t> requested_reads(const Json& entry) {
    uint64_t reads = 0;
    uint64_t bytes = 0;
    for (const Json& quant : field(entry, "quant")) {
        for (const char* kind : {"demand", "prefetch"}) {
            const Json& r = field(quant, kind);
            reads += count(r, "reads_ok") + count(r, "reads_failed");
            bytes += count(r, "requested_bytes");
        }
    }
    return {reads, bytes};
}

std::vector<std::string> counter_cells(const Json& entry) {
    const auto [reads, bytes] = requested_reads(entry);
    std::vector<std::string> cells = {
        std::to_string(count(entry, "selections")), std::to_string(count(entry, "hits")),
        std::to_string(count(entry, "misses")),
        percent_text(count(entry, "hits"), count(entry, "selections")),
        std::to_string(count(entry, "prefetches_issued"))};
    if (entry.contains("quant")) {
        cells.push_back(std::to_string(reads));
        cells.push_back(bytes_text(bytes));
    }
    return cells;
}

std::string page_footer(const Json& page, const TextStyle& style) {
    std::string out =
        "\n" + style.item("observed", time_text(field(page, "observed_at").is_number()
                                                    ? page["observed_at"].get<double>()
                                                    : 0.0));
    const Json& next = field(page, "next_offset");
    out += style.item("next_offset", next.is_null() ? "none (last page)" : value_text(next));
    return out;
}

std::string summary_text(const Json& s, const TextStyle& style) {
    std::string out = style.heading("cherenkov stats");
    out += style.item("observed", time_text(field(s, "observed_at").get<double>()));
    out += style.item("uptime", value_text(field(s, "uptime_seconds")) + " s");
    out += style.item("backend", value_text(field(s, "backend")) + ", Q" +
                                     value_text(field(s, "expert_bits")) + " experts");
    const Json& totals = field(s, "totals");
    if (!totals.is_null()) {
        out += "\n" + style.heading("Experts", 2);
        out += style.table({"layers", "selections", "hits", "misses", "hit rate", "prefetches",
                            "reads", "requested"},
                           {[&] {
                               std::vector<std::string> row = {value_text(field(s, "n_layers"))};
                               for (std::string& cell : counter_cells(totals))
                                   row.push_back(std::move(cell));
                               return row;
                           }()});
        const Json& rates = field(s, "rates");
        out +=
            "\n" + style.item("completed since load",
                              bytes_text(count(s, "experts_read_bytes")) + " (" +
                                  bytes_text(static_cast<uint64_t>(
                                      field(rates, "completed_bytes_per_second").get<double>())) +
                                  "/s average)");
        const Json& prediction = field(totals, "prediction");
        out += style.item("prediction", "recall " + value_text(field(prediction, "recall")) +
                                            ", precision " +
                                            value_text(field(prediction, "precision")));
    }
    const Json& prefill = field(s, "prefill");
    out += "\n" + style.heading("Prefill", 2);
    out += style.item("chunks", value_text(field(prefill, "chunks")) + " (" +
                                    value_text(field(prefill, "min_chunk_tokens")) + "-" +
                                    value_text(field(prefill, "max_chunk_tokens")) + " tokens)");
    out += style.item("tokens", value_text(field(prefill, "tokens")) + " in " +
                                    value_text(field(prefill, "seconds")) + " s");
    const Json& requests = field(s, "requests");
    out += "\n" + style.heading("Requests", 2);
    out += style.item("running", value_text(field(requests, "active")) + ", queued " +
                                     value_text(field(requests, "queued")));
    out += style.item("tokens", value_text(field(requests, "prompt_tokens")) + " prompt (" +
                                    value_text(field(requests, "cached_prompt_tokens")) +
                                    " cached), " + value_text(field(requests, "generated_tokens")) +
                                    " generated");
    const Json& gpu = field(field(s, "phases"), "gpu_timing");
    out += "\n" + style.item("gpu timing", value_text(field(gpu, "status")));
    return out;
}

std::string layers_text(const Json& page, const TextStyle& style) {
    std::string out = style.heading("Expert layers");
    std::vector<std::vector<std::string>> rows;
    for (const Json& entry : field(page, "layers")) {
        std::vector<std::string> row = {value_text(field(entry, "layer"))};
        for (std::string& cell : counter_cells(entry)) row.push_back(std::move(cell));
        rows.push_back(std::move(row));
    }
    out += style.table(
        {"layer", "selections", "hits", "misses", "hit rate", "prefetches", "reads", "requested"},
        rows);
    return out + page_footer(page, style);
}

std::string experts_text(const Json& page, const TextStyle& style) {
    std::string out = style.heading("Experts of layer " + value_text(field(page, "layer")));
    std::vector<std::vector<std::string>> rows;
    for (const Json& entry : field(page, "experts")) {
        std::vector<std::string> row = {value_text(field(entry, "expert"))};
        for (std::string& cell : counter_cells(entry)) row.push_back(std::move(cell));
        row.push_back(std::to_string(count(entry, "cuts")));
        rows.push_back(std::move(row));
    }
    out += style.table({"expert", "selections", "hits", "misses", "hit rate", "prefetches", "cuts"},
                       rows);
    return out + page_footer(page, style);
}

int print(const StatsOptions& options, const Json& request,
          std::string (*text)(const Json&, const TextStyle&)) {
    const Json answer = control_call(socket_or_default(options.socket), request);
    if (options.json) {
        std::cout << answer.dump(2) << '\n';
    } else {
        std::cout << text(answer, TextStyle::for_stdout());
    }
    return 0;
}

void add_common(CLI::App* app, StatsOptions& options) {
    app->add_flag("--json", options.json, "Print the complete answer as JSON");
    app->add_option("--socket", options.socket,
                    "The server's control socket (default $TMPDIR/cherenkov-UID/control.sock)");
}

void add_paging(CLI::App* app, StatsOptions& options) {
    app->add_option("--offset", options.offset, "First entry of the page (default 0)")
        ->check(in_range(0, UINT32_MAX));
    app->add_option("--limit", options.limit,
                    "Most entries on the page, 1-128 (default 64; pages may be shorter to fit "
                    "64 KiB: follow next_offset)")
        ->check(in_range(1, 128));
}

}  // namespace

std::vector<Command> register_stats_commands(CLI::App& parent) {
    auto options = std::make_shared<StatsOptions>();
    CLI::App* stats = parent.add_subcommand(
        "stats", "Show the running server's statistics, over its control socket");
    stats->require_subcommand(1);

    CLI::App* summary = stats->add_subcommand("summary",
                                              "Totals since load: experts, reads, "
                                              "prefill, phases, requests, memory");
    add_common(summary, *options);
    CLI::App* layers = stats->add_subcommand("layers", "Per-layer expert counters, paged");
    add_common(layers, *options);
    add_paging(layers, *options);
    CLI::App* experts = stats->add_subcommand("experts", "Per-expert counters of one layer, paged");
    experts->add_option("LAYER", options->layer, "Layer (index in the packed expert table)")
        ->required()
        ->check(in_range(0, UINT32_MAX));
    add_common(experts, *options);
    add_paging(experts, *options);

    return {
        {summary,
         [options] {
             return print(*options, {{"op", "stats_summary"}}, summary_text);
         }},
        {layers,
         [options] {
             return print(
                 *options,
                 {{"op", "stats_layers"}, {"offset", options->offset}, {"limit", options->limit}},
                 layers_text);
         }},
        {experts,
         [options] {
             return print(*options,
                          {{"op", "stats_experts"},
                           {"layer", options->layer},
                           {"offset", options->offset},
                           {"limit", options->limit}},
                          experts_text);
         }},
    };
}

}  // namespace cherenkov::cli
