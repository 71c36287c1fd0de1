// range (capped like the sandbox's safe_range), dict, namespace, cycler, joiner,
// raise_exception and strftime_now.
#include "text/jinja/builtins.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>

#include "base/error.h"
#include "text/jinja/call_args.h"
#include "text/jinja/callables.h"
#include "text/jinja/lookup.h"
#include "text/jinja/renderer.h"

namespace cherenkov::text::jinja {

namespace {

// jinja2.sandbox.MAX_RANGE
constexpr int64_t kMaxRange = 100000;

int64_t range_argument(const Value& value) {
    if (!value.is_integral()) {
        throw_invalid("'" + value.type_name() + "' object cannot be interpreted as an integer");
    }
    return value.as_int();
}

Value range_function(Renderer&, CallArgs& args) {
    if (!args.keywords.empty()) throw_invalid("range() takes no keyword arguments");
    size_t n = args.positional.size();
    if (n < 1 || n > 3) throw_invalid("range expected 1 to 3 arguments, got " + std::to_string(n));
    int64_t start = 0;
    int64_t stop = 0;
    int64_t step = 1;
    if (n == 1) {
        stop = range_argument(args.positional[0]);
    } else {
        start = range_argument(args.positional[0]);
        stop = range_argument(args.positional[1]);
        if (n == 3) step = range_argument(args.positional[2]);
    }
    if (step == 0) throw_invalid("range() arg 3 must not be zero");
    // Length computed in long double so that extreme bounds cannot overflow.
    long double span =
        step > 0 ? static_cast<long double>(stop) - start : static_cast<long double>(start) - stop;
    long double magnitude = step > 0 ? step : -static_cast<long double>(step);
    long double count = span <= 0 ? 0 : (span + magnitude - 1) / magnitude;
    if (count > kMaxRange) {
        throw_invalid("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    ValueList items;
    int64_t value = start;
    for (int64_t index = 0; index < static_cast<int64_t>(count); ++index, value += step) {
        items.push_back(Value::integer(value));
    }
    return Value::list(std::move(items));
}

// Python dict(*args, **kwargs).
Dict make_dict(CallArgs& args, const char* function) {
    if (args.positional.size() > 1) {
        throw_invalid(std::string(function) + " expected at most 1 argument, got " +
                      std::to_string(args.positional.size()));
    }
    Dict out;
    if (!args.positional.empty()) {
        const Value& source = args.positional[0];
        if (source.is_dict()) {
            out = source.as_dict();
        } else {
            size_t index = 0;
            for (const auto& pair : iterate(source)) {
                ValueList items = pair.is_list() || pair.is_view() || pair.is_string()
                                      ? iterate(pair)
                                      : ValueList{};
                if (items.size() != 2) {
                    throw_invalid("dictionary update sequence element #" + std::to_string(index) +
                                  " has length " + std::to_string(items.size()) +
                                  "; 2 is required");
                }
                out.set(items[0], items[1]);
                ++index;
            }
        }
    }
    for (auto& [name, value] : args.keywords) out.set(Value::string(name), value);
    return out;
}

Value dict_function(Renderer&, CallArgs& args) {
    return Value::dict(make_dict(args, "dict"));
}

Value namespace_function(Renderer& renderer, CallArgs& args) {
    Dict attributes = make_dict(args, "namespace");
    for (const auto& [key, value] : attributes.items()) {
        if (key.is_string()) Namespace::check_name(key.as_string());
    }
    auto ns = std::make_shared<Namespace>(std::move(attributes));
    renderer.adopt(ns);
    return Value::object(ns);
}

Value raise_exception_function(Renderer& renderer, CallArgs& args) {
    BoundArgs bound("raise_exception", args, {"message"}, 1);
    renderer.raise_from_template(to_str(bound.get(0)));
}

// datetime.now().strftime(format): a naive local time, so %z and %Z are empty.
Value strftime_now_function(Renderer&, CallArgs& args) {
    BoundArgs bound("strftime_now", args, {"format"}, 1);
    std::string format = bound.string(0, "");
    auto now = std::chrono::system_clock::now();
    std::time_t seconds = std::chrono::system_clock::to_time_t(now);
    auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
        1000000;
    std::tm local{};
    localtime_r(&seconds, &local);
    std::string expanded;
    for (size_t pos = 0; pos < format.size(); ++pos) {
        if (format[pos] != '%' || pos + 1 >= format.size()) {
            expanded += format[pos];
            continue;
        }
        char code = format[++pos];
        if (code == 'f') {
            char buffer[8];
            std::snprintf(buffer, sizeof(buffer), "%06lld", static_cast<long long>(micros));
            expanded += buffer;
        } else if (code != 'z' && code != 'Z') {
            expanded += '%';
            expanded += code;
        }
    }
    std::string out(expanded.size() * 4 + 64, '\0');
    // The format comes from the template by design (Python passes it to the C library too).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    size_t n =
        expanded.empty() ? 0 : std::strftime(out.data(), out.size(), expanded.c_str(), &local);
#pragma GCC diagnostic pop
    out.resize(n);
    return Value::string(std::move(out));
}

// jinja2.utils.Cycler
class Cycler : public Object, public std::enable_shared_from_this<Cycler> {
public:
    explicit Cycler(ValueList items) : items_(std::move(items)) {}
    std::string type_name() const override { return "Cycler"; }
    std::string repr(int) const override { return "<Cycler>"; }
    std::optional<Value> attribute(std::string_view name) const override {
        // Bound methods keep the cycler alive, as Python's do.
        auto self = std::const_pointer_cast<Cycler>(shared_from_this());
        if (name == "current") return items_[position_];
        if (name == "items") return Value::list(items_);
        if (name == "next" || name == "__next__") {
            return make_function("next", [self](Renderer&, CallArgs& args) {
                require_no_args("next", args);
                Value current = self->items_[self->position_];
                self->position_ = (self->position_ + 1) % self->items_.size();
                return current;
            });
        }
        if (name == "reset") {
            return make_function("reset", [self](Renderer&, CallArgs& args) {
                require_no_args("reset", args);
                self->position_ = 0;
                return Value::none();
            });
        }
        return std::nullopt;
    }

private:
    ValueList items_;
    size_t position_ = 0;
};

Value cycler_function(Renderer&, CallArgs& args) {
    if (!args.keywords.empty()) throw_invalid("cycler() takes no keyword arguments");
    if (args.positional.empty()) throw_invalid("at least one item has to be provided");
    return Value::object(std::make_shared<Cycler>(std::move(args.positional)));
}

Value joiner_function(Renderer&, CallArgs& args) {
    BoundArgs bound("joiner", args, {"sep"});
    auto separator = std::make_shared<std::string>(bound.has(0) ? to_str(bound.get(0)) : ", ");
    auto used = std::make_shared<bool>(false);
    return make_function("joiner", [separator, used](Renderer&, CallArgs& call) {
        require_no_args("joiner", call);
        if (!*used) {
            *used = true;
            return Value::string("");
        }
        return Value::string(*separator);
    });
}

Value lipsum_function(Renderer&, CallArgs&) {
    throw_unsupported("lipsum() is not supported");
}

}  // namespace

std::optional<Value> builtin_global(std::string_view name) {
    // Immutable function objects, shared by every render.
    static const std::map<std::string, Value, std::less<>> kGlobals = {
        {"range", make_function("range", range_function)},
        {"dict", make_function("dict", dict_function)},
        {"namespace", make_function("namespace", namespace_function)},
        {"cycler", make_function("cycler", cycler_function)},
        {"joiner", make_function("joiner", joiner_function)},
        {"lipsum", make_function("lipsum", lipsum_function)},
        {"raise_exception", make_function("raise_exception", raise_exception_function)},
        {"strftime_now", make_function("strftime_now", strftime_now_function)},
    };
    auto found = kGlobals.find(name);
    if (found == kGlobals.end()) return std::nullopt;
    return found->second;
}

}  // namespace cherenkov::text::jinja
