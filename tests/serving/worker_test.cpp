// The worker without HTTP: a writer that stops reading is cut off after 16 frames (the request
// ends as cancelled, and its final frame still arrives); cancellation before admission answers
// 499; a lone request is never parked.
#include "serving/worker.h"

#include <gtest/gtest.h>

#include <string>

#include "serving/scripted_backend.h"
#include "text/tokenizer/tokenizer.h"

namespace cherenkov::serving {
namespace {

const std::string kModelDir = std::string(CHERENKOV_SOURCE_DIR) + "/models/tiny-python";

struct Fixture {
    text::Tokenizer tokenizer = text::Tokenizer::load_directory(kModelDir);
    testing::ScriptedBackend backend;

    explicit Fixture(const std::string& script)
        : backend(tokenizer.encode(script, true), *tokenizer.eos_token_id(),
                  static_cast<int64_t>(tokenizer.vocab_size())) {}

    std::unique_ptr<Job> job(const std::string& id, int64_t max_tokens, bool stream) {
        auto j = std::make_unique<Job>();
        j->channel = std::make_shared<RequestChannel>(id);
        j->prompt = tokenizer.encode("prompt", true);
        j->generation.max_tokens = max_tokens;
        j->generation.drafts = 0;
        j->generation.max_ctx = 1024;
        j->generation.eos_ids = {*tokenizer.eos_token_id()};
        j->text = std::make_unique<ResponseText>(tokenizer, std::vector<std::string>{}, nullptr,
                                                 false, 0, 0);
        j->stream = stream;
        return j;
    }
};

// Frames of `channel` until its final one.
std::vector<Frame> drain(RequestChannel& channel) {
    std::vector<Frame> frames;
    while (frames.empty() || !frames.back().final) {
        std::optional<Frame> f = channel.next_frame(std::chrono::seconds(10));
        if (!f) {
            ADD_FAILURE() << "no final frame";
            break;
        }
        frames.push_back(std::move(*f));
    }
    return frames;
}

TEST(Worker, AWriterSixteenFramesBehindCancelsTheRequest) {
    std::string script;
    for (int i = 0; i < 200; ++i) script += " w" + std::to_string(i);
    Fixture f(script);
    Worker worker(f.backend, WorkerOptions{});
    std::unique_ptr<Job> job = f.job("slow", 150, true);
    std::shared_ptr<RequestChannel> channel = job->channel;
    worker.submit(std::move(job));
    ASSERT_EQ(channel->wait_admission(nullptr), Admission::Admitted);
    // Nobody reads until the worker has given up on the request.
    for (int i = 0; i < 2000 && worker.counters().cancelled == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const std::vector<Frame> frames = drain(*channel);
    EXPECT_EQ(frames.size(), RequestChannel::kQueueFrames + 1);
    EXPECT_EQ(frames.back().finish_reason, "cancelled");
    EXPECT_LT(frames.back().usage.completion_tokens, 150);
    EXPECT_EQ(worker.counters().active, 0);
}

TEST(Worker, CancelBeforeAdmissionAnswers499AndALoneRequestIsNeverParked) {
    std::string script;
    for (int i = 0; i < 300; ++i) script += " w" + std::to_string(i);
    Fixture f(script);
    f.backend.delay = std::chrono::milliseconds(2);
    WorkerOptions options;
    options.max_active = 1;
    Worker worker(f.backend, options);
    std::unique_ptr<Job> first = f.job("first", 200, false);
    std::shared_ptr<RequestChannel> running = first->channel;
    worker.submit(std::move(first));
    ASSERT_EQ(running->wait_admission(nullptr), Admission::Admitted);
    std::unique_ptr<Job> second = f.job("second", 4, false);
    std::shared_ptr<RequestChannel> waiting = second->channel;
    waiting->set_on_cancel([&] { worker.poke(); });
    worker.submit(std::move(second));
    waiting->cancel();
    std::optional<ApiError> rejection;
    EXPECT_EQ(waiting->wait_admission(&rejection), Admission::Rejected);
    ASSERT_TRUE(rejection);
    EXPECT_EQ(rejection->status(), 499);
    const std::vector<Frame> frames = drain(*running);
    EXPECT_EQ(frames.back().finish_reason, "length");
    EXPECT_EQ(frames.back().usage.completion_tokens, 200);
    EXPECT_EQ(worker.counters().switches, 0U);
}

TEST(Worker, EachRunningRequestHoldsItsOwnCachesSoInterleavingParksNothing) {
    std::string script;
    for (int i = 0; i < 100; ++i) script += " w" + std::to_string(i);
    Fixture f(script);
    f.backend.delay = std::chrono::milliseconds(1);
    Worker worker(f.backend, WorkerOptions{});  // two active requests, two sets of caches
    std::vector<std::shared_ptr<RequestChannel>> channels;
    for (const char* id : {"a", "b"}) {
        std::unique_ptr<Job> j = f.job(id, 80, false);
        channels.push_back(j->channel);
        worker.submit(std::move(j));
    }
    for (auto& c : channels) {
        ASSERT_EQ(c->wait_admission(nullptr), Admission::Admitted);
        const std::vector<Frame> frames = drain(*c);
        EXPECT_EQ(frames.back().usage.completion_tokens, 80);
    }
    EXPECT_EQ(worker.counters().switches, 0U);
}

TEST(Worker, ReservationsWaitForRoomAndOversizedRequestsGet503) {
    Fixture f("a b c d e f g h");
    WorkerOptions options;
    options.max_active = 4;
    options.state_budget_bytes = 1000;
    options.state_bytes = [](int64_t tokens) { return static_cast<uint64_t>(tokens); };
    Worker worker(f.backend, options);
    std::unique_ptr<Job> big = f.job("big", 4, false);
    big->generation.max_ctx = 1001;
    std::shared_ptr<RequestChannel> channel = big->channel;
    worker.submit(std::move(big));
    std::optional<ApiError> rejection;
    EXPECT_EQ(channel->wait_admission(&rejection), Admission::Rejected);
    EXPECT_EQ(rejection->status(), 503);
    // Two requests of 600 do not fit together: the second waits, then runs.
    std::vector<std::shared_ptr<RequestChannel>> channels;
    for (const char* id : {"a", "b"}) {
        std::unique_ptr<Job> j = f.job(id, 4, false);
        j->generation.max_ctx = 600;
        channels.push_back(j->channel);
        worker.submit(std::move(j));
    }
    for (auto& c : channels) {
        EXPECT_EQ(c->wait_admission(nullptr), Admission::Admitted);
        EXPECT_EQ(drain(*c).back().finish_reason, "length");
    }
    EXPECT_EQ(worker.counters().reserved_bytes, 0U);
}

}  // namespace
}  // namespace cherenkov::serving
