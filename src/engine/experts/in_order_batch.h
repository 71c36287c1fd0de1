// An ExpertBatch whose records are all ready when it is made: delivers them in request order.
// What a source without reads in flight hands out (DirectExpertReader, MappedExpertTable).
#pragma once

#include <vector>

#include "engine/experts/expert_source.h"

namespace cherenkov::engine {

class InOrderBatch : public ExpertBatch {
public:
    // records[i]: request i's record, laid out as `layout`; both outlive the batch.
    InOrderBatch(std::vector<const std::byte*> records, const store::ExpertLayout& layout)
        : records_(std::move(records)), layout_(layout) {}

    bool ready() const override { return true; }

    bool next(size_t* request_index, ExpertWeights* weights) override {
        if (next_ >= records_.size()) return false;
        *request_index = next_;
        *weights = expert_weights_in_record(records_[next_], layout_);
        ++next_;
        return true;
    }

private:
    std::vector<const std::byte*> records_;
    const store::ExpertLayout& layout_;
    size_t next_ = 0;
};

}  // namespace cherenkov::engine
