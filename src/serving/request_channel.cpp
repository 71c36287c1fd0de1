#include "serving/request_channel.h"

namespace cherenkov::serving {

bool RequestChannel::cancel() {
    std::function<void()> notify;
    {
        std::lock_guard lock(mutex_);
        if (published_) return false;
        if (cancelled_) return true;
        cancelled_ = true;
        notify = on_cancel_;
    }
    changed_.notify_all();
    if (notify) notify();
    return true;
}

bool RequestChannel::publish() {
    std::lock_guard lock(mutex_);
    if (cancelled_) return false;
    published_ = true;
    return true;
}

bool RequestChannel::cancelled() const {
    std::lock_guard lock(mutex_);
    return cancelled_;
}

void RequestChannel::set_on_cancel(std::function<void()> on_cancel) {
    std::lock_guard lock(mutex_);
    on_cancel_ = std::move(on_cancel);
}

Admission RequestChannel::wait_admission(std::optional<ApiError>* rejection) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return admission_ != Admission::Waiting; });
    if (rejection != nullptr) *rejection = rejection_;
    return admission_;
}

std::optional<Frame> RequestChannel::next_frame(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return !frames_.empty(); })) return std::nullopt;
    Frame frame = std::move(frames_.front());
    frames_.pop_front();
    return frame;
}

void RequestChannel::admit() {
    {
        std::lock_guard lock(mutex_);
        admission_ = Admission::Admitted;
    }
    changed_.notify_all();
}

void RequestChannel::reject(ApiError error) {
    {
        std::lock_guard lock(mutex_);
        admission_ = Admission::Rejected;
        rejection_ = std::move(error);
    }
    changed_.notify_all();
}

bool RequestChannel::push(Frame frame) {
    {
        std::lock_guard lock(mutex_);
        if (!frame.final && frames_.size() >= kQueueFrames) return false;
        frames_.push_back(std::move(frame));
    }
    changed_.notify_all();
    return true;
}

}  // namespace cherenkov::serving
