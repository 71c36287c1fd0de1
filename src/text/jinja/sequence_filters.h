// Filters over sequences and mappings (first, join, map, select, sort, unique, dictsort, ...),
// registered by filters.cpp. Where Jinja2 returns a generator they return a generator view.
#pragma once

#include "text/jinja/value.h"

namespace cherenkov::text::jinja {

Value filter_attr(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_batch(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_dictsort(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_first(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_items(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_join(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_last(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_length(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_list(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_map(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_max(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_min(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_reject(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_rejectattr(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_reverse(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_select(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_selectattr(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_slice(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_sort(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_sum(Renderer& renderer, const Value& value, CallArgs& args);
Value filter_unique(Renderer& renderer, const Value& value, CallArgs& args);

}  // namespace cherenkov::text::jinja
