// The control socket (docs/monitoring.md): path safety (private directory, symlinks, stale
// sockets, a second owner), the protocol (requests, errors, paging cut to 64 KiB) and a round
// trip between ControlServer and control_request.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "base/error.h"
#include "serving/control/control_client.h"
#include "serving/control/control_protocol.h"
#include "serving/control/control_server.h"
#include "serving/control/control_socket_path.h"
#include "serving/control/monitoring_handlers.h"
#include "support/temp_dir.h"

namespace cherenkov::serving::control {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

// A private directory inside a fresh temporary one (short enough for sun_path).
std::string private_dir(const testing::TempDir& temp) {
    const std::string dir = temp.file("c");
    EXPECT_EQ(::mkdir(dir.c_str(), 0700), 0);
    return dir;
}

ErrorKind kind_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.kind();
    }
    ADD_FAILURE() << "no Error thrown";
    return ErrorKind::Internal;
}

std::string message_of(const std::function<void()>& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

// Binds a socket at `path` and closes it without unlinking: what a killed server leaves.
void leave_stale_socket(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size());
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    ::close(fd);
}

ControlHandlers echo_handlers() {
    ControlHandlers handlers;
    handlers.status = [] { return Json{{"ready", true}}; };
    handlers.stats_layers = [](const PageRequest& page) {
        return make_page("layers", 300, page, [](uint64_t layer) {
            return Json{{"layer", layer}, {"padding", std::string(1000, 'x')}};
        });
    };
    return handlers;
}

TEST(ControlSocketPath, DefaultIsPerUserUnderTmpdir) {
    const std::string path = default_control_socket_path();
    EXPECT_NE(path.find("/cherenkov-" + std::to_string(::geteuid()) + "/control.sock"),
              std::string::npos);
}

TEST(ControlSocketPath, CreatesThePrivateDirectory) {
    testing::TempDir temp;
    const std::string socket = temp.file("fresh") + "/control.sock";
    FileLock lock = claim_control_socket_path(socket);
    struct stat info {};
    ASSERT_EQ(::stat(temp.file("fresh").c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0700U);
    EXPECT_TRUE(lock.held());
}

TEST(ControlSocketPath, RefusesAGroupReadableDirectory) {
    testing::TempDir temp;
    const std::string dir = private_dir(temp);
    ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);
    EXPECT_EQ(kind_of([&] { claim_control_socket_path(dir + "/control.sock"); }),
              ErrorKind::InvalidInput);
    EXPECT_NE(message_of([&] {
                  claim_control_socket_path(dir + "/control.sock");
              }).find("unsafe permissions 0750"),
              std::string::npos);
}

TEST(ControlSocketPath, RefusesASymlinkedDirectory) {
    testing::TempDir temp;
    const std::string dir = private_dir(temp);
    const std::string link = temp.file("link");
    ASSERT_EQ(::symlink(dir.c_str(), link.c_str()), 0);
    EXPECT_NE(
        message_of([&] { claim_control_socket_path(link + "/control.sock"); }).find("is a symlink"),
        std::string::npos);
}

TEST(ControlSocketPath, RefusesASymlinkAtTheSocketPath) {
    testing::TempDir temp;
    const std::string dir = private_dir(temp);
    const std::string target = temp.write("target", "x");
    ASSERT_EQ(::symlink(target.c_str(), (dir + "/control.sock").c_str()), 0);
    EXPECT_EQ(kind_of([&] { claim_control_socket_path(dir + "/control.sock"); }),
              ErrorKind::InvalidInput);
    EXPECT_TRUE(std::filesystem::exists(target));
    EXPECT_EQ(kind_of([&] { check_control_socket_for_client(dir + "/control.sock"); }),
              ErrorKind::InvalidInput);
}

TEST(ControlSocketPath, RemovesAStaleSocket) {
    testing::TempDir temp;
    const std::string socket = private_dir(temp) + "/control.sock";
    leave_stale_socket(socket);
    ASSERT_TRUE(std::filesystem::is_socket(socket));
    FileLock lock = claim_control_socket_path(socket);
    EXPECT_FALSE(std::filesystem::exists(socket));
}

TEST(ControlSocketPath, RefusesASecondOwner) {
    testing::TempDir temp;
    const std::string socket = private_dir(temp) + "/control.sock";
    ControlServer first(socket, echo_handlers());
    EXPECT_EQ(kind_of([&] { ControlServer second(socket, echo_handlers()); }), ErrorKind::Busy);
    // The first server's socket survives the refused second one.
    EXPECT_EQ(control_request(socket, {{"op", "status"}}, 2s)["ready"], true);
}

TEST(ControlServer, SocketIsPrivateAndRemovedOnStop) {
    testing::TempDir temp;
    const std::string socket = private_dir(temp) + "/control.sock";
    {
        ControlServer server(socket, echo_handlers());
        struct stat info {};
        ASSERT_EQ(::lstat(socket.c_str(), &info), 0);
        EXPECT_TRUE(S_ISSOCK(info.st_mode));
        EXPECT_EQ(info.st_mode & 0777, 0600U);
    }
    EXPECT_FALSE(std::filesystem::exists(socket));
    EXPECT_EQ(kind_of([&] {
                  control_request(socket, {{"op", "status"}}, 1s);
              }),
              ErrorKind::NotFound);
}

TEST(ControlServer, AnswersAStaleSocketWithNotFound) {
    testing::TempDir temp;
    const std::string socket = private_dir(temp) + "/control.sock";
    leave_stale_socket(socket);
    EXPECT_NE(message_of([&] {
                  control_request(socket, {{"op", "status"}}, 1s);
              }).find("no server is answering"),
              std::string::npos);
}

TEST(ControlServer, AnswersErrorsAsJson) {
    testing::TempDir temp;
    const std::string socket = private_dir(temp) + "/control.sock";
    ControlServer server(socket, echo_handlers());
    EXPECT_EQ(control_request(socket, {{"op", "config_show"}}, 2s)["error"]["code"],
              "not_available");
    EXPECT_EQ(control_request(socket, {{"op", "nope"}}, 2s)["error"]["code"], "invalid_request");
    EXPECT_EQ(control_request(socket, {{"op", "stats_layers"}, {"limit", 0}}, 2s)["error"]["code"],
              "invalid_request");
}

TEST(ControlServer, PagesFitTheFrameAndChainToTheEnd) {
    testing::TempDir temp;
    const std::string socket = private_dir(temp) + "/control.sock";
    ControlServer server(socket, echo_handlers());
    uint64_t offset = 0;
    uint64_t seen = 0;
    int pages = 0;
    for (;;) {
        const Json page = control_request(
            socket, {{"op", "stats_layers"}, {"offset", offset}, {"limit", 128}}, 2s);
        ASSERT_FALSE(page.contains("error")) << page.dump();
        EXPECT_LE(control_frame(page).size(), kMaxFrameBytes);
        ASSERT_FALSE(page["layers"].empty());
        EXPECT_EQ(page["layers"][0]["layer"], offset);
        seen += page["layers"].size();
        ++pages;
        if (page["next_offset"].is_null()) break;
        offset = page["next_offset"].get<uint64_t>();
        ASSERT_EQ(offset, seen);
    }
    EXPECT_EQ(seen, 300U);
    EXPECT_GE(pages, 5);  // ~1 kB entries: about 60 to a 64 KiB frame
}

TEST(ControlServer, ClosesAConnectionThatSendsNothing) {
    testing::TempDir temp;
    const std::string socket = private_dir(temp) + "/control.sock";
    ControlServer server(socket, echo_handlers());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, socket.c_str(), socket.size());
    ASSERT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    char buffer[512] = {};
    const ssize_t n = ::recv(fd, buffer, sizeof buffer - 1, 0);  // after the 2 s deadline
    ::close(fd);
    ASSERT_GT(n, 0);
    EXPECT_NE(std::string(buffer).find("\"timeout\""), std::string::npos);
    // The server still answers others.
    EXPECT_EQ(control_request(socket, {{"op", "status"}}, 2s)["ready"], true);
}

TEST(ControlProtocol, ParsesRequests) {
    const ControlRequest experts =
        parse_control_request(R"({"op":"stats_experts","layer":7,"offset":32,"limit":16})");
    EXPECT_EQ(experts.op, ControlOp::StatsExperts);
    EXPECT_EQ(experts.layer, 7U);
    EXPECT_EQ(experts.page.offset, 32U);
    EXPECT_EQ(experts.page.limit, 16U);
    EXPECT_EQ(parse_control_request(R"({"op":"stats_layers"})").page.limit, 64U);
}

TEST(ControlProtocol, RejectsBadRequestsNamingTheField) {
    for (const auto& [line, field] : std::vector<std::pair<std::string, std::string>>{
             {"{", "not valid JSON"},
             {"[]", "JSON object"},
             {R"({"op":1})", "'op'"},
             {R"({"op":"reboot"})", "unknown op 'reboot'"},
             {R"({"op":"status","limit":3})", "unknown field 'limit'"},
             {R"({"op":"stats_layers","limit":129})", "'limit'"},
             {R"({"op":"stats_layers","limit":0})", "'limit'"},
             {R"({"op":"stats_layers","offset":-1})", "'offset'"},
             {R"({"op":"stats_layers","offset":1.5})", "'offset'"},
             {R"({"op":"stats_experts"})", "'layer'"},
         }) {
        const std::string message = message_of([&] { parse_control_request(line); });
        EXPECT_NE(message.find(field), std::string::npos) << line << " → " << message;
    }
}

TEST(ControlProtocol, HandlerErrorsBecomeCodes) {
    ControlHandlers handlers;
    handlers.stats_summary = []() -> Json { throw Error(ErrorKind::Busy, "still loading"); };
    const Json answer =
        dispatch_control_request(handlers, parse_control_request(R"({"op":"stats_summary"})"));
    EXPECT_EQ(answer["error"]["code"], "not_ready");
    EXPECT_EQ(answer["error"]["message"], "still loading");
}

TEST(ControlProtocol, FitPageKeepsWholeEntriesAndSetsNextOffset) {
    Json page = {{"layers", Json::array()}, {"next_offset", nullptr}};
    for (int entry = 0; entry < 100; ++entry)
        page["layers"].push_back({{"layer", 10 + entry}, {"padding", std::string(100, 'y')}});
    fit_page(page, "layers", 10, 2000);
    EXPECT_LE(control_frame(page).size(), 2000U);
    EXPECT_GT(page["layers"].size(), 5U);
    EXPECT_EQ(page["next_offset"], 10 + page["layers"].size());
}

}  // namespace
}  // namespace cherenkov::serving::control
