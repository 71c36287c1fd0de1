// Renders an inspect report (checkpoint_report.h) as a readable text report for stdout.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace cherenkov::model_data::inspect {

std::string render_report_text(const nlohmann::json& report);

// "1.5 GiB", "312 B": binary units, one decimal.
std::string format_bytes(uint64_t n_bytes);

}  // namespace cherenkov::model_data::inspect
