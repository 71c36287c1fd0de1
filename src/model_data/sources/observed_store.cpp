#include "model_data/sources/observed_store.h"

#include <mutex>

namespace cherenkov::model_data {
namespace {

// Shared by the store and every source it opened; the mutex serializes observer calls.
struct Observer {
    std::mutex mutex;  // guards calls to `observer`
    ReadObserver observer;
};

class ObservedSource final : public ByteSource {
public:
    ObservedSource(std::unique_ptr<ByteSource> inner, std::string object,
                   std::shared_ptr<Observer> observer)
        : inner_(std::move(inner)), object_(std::move(object)), observer_(std::move(observer)) {}

    const std::string& name() const override { return inner_->name(); }
    uint64_t size() const override { return inner_->size(); }
    std::shared_ptr<const MappedFile> mapping() const override { return inner_->mapping(); }

    void read(uint64_t offset, std::span<std::byte> out) const override {
        inner_->read(offset, out);
        std::lock_guard<std::mutex> lock(observer_->mutex);
        observer_->observer(object_, offset, out.size());
    }

private:
    std::unique_ptr<ByteSource> inner_;
    std::string object_;
    std::shared_ptr<Observer> observer_;
};

class ObservedStore final : public ObjectStore {
public:
    ObservedStore(std::unique_ptr<ObjectStore> inner, ReadObserver observer)
        : inner_(std::move(inner)), observer_(std::make_shared<Observer>()) {
        observer_->observer = std::move(observer);
    }

    const std::string& location() const override { return inner_->location(); }
    bool exists(const std::string& relative_name) const override {
        return inner_->exists(relative_name);
    }
    std::unique_ptr<ByteSource> open(const std::string& relative_name) const override {
        return std::make_unique<ObservedSource>(inner_->open(relative_name), relative_name,
                                                observer_);
    }
    std::optional<std::vector<std::string>> list() const override { return inner_->list(); }

private:
    std::unique_ptr<ObjectStore> inner_;
    std::shared_ptr<Observer> observer_;
};

}  // namespace

std::unique_ptr<ObjectStore> observe_reads(std::unique_ptr<ObjectStore> inner,
                                           ReadObserver observer) {
    return std::make_unique<ObservedStore>(std::move(inner), std::move(observer));
}

}  // namespace cherenkov::model_data
