// An error the HTTP API answers with: a status code and OpenAI's error object,
// {"error": {"message", "type", "param", "code"}} (docs/serving.md lists the codes).
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace cherenkov::serving {

class ApiError : public std::runtime_error {
public:
    ApiError(int status, const std::string& message, std::string type, std::string param = "",
             std::string code = "")
        : std::runtime_error(message),
          status_(status),
          type_(std::move(type)),
          param_(std::move(param)),
          code_(std::move(code)) {}

    int status() const { return status_; }

    nlohmann::json body() const {
        nlohmann::json error = {{"message", what()}, {"type", type_}};
        error["param"] = param_.empty() ? nlohmann::json(nullptr) : nlohmann::json(param_);
        error["code"] = code_.empty() ? nlohmann::json(nullptr) : nlohmann::json(code_);
        return {{"error", error}};
    }

private:
    int status_;
    std::string type_;
    std::string param_;
    std::string code_;
};

// 400 for a field the client got wrong; `param` names it as a JSON path ("messages[1].role").
[[noreturn]] inline void throw_bad_field(const std::string& param, const std::string& message,
                                         const std::string& code = "") {
    throw ApiError(400, param.empty() ? message : param + ": " + message, "invalid_request_error",
                   param, code);
}

}  // namespace cherenkov::serving
