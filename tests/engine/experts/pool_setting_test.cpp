// The pool flags' parser: each flag's words, decimal GB, messages naming the flag, and the text
// form the configuration prints reading back equal.
#include "engine/experts/pool_setting.h"

#include <gtest/gtest.h>

#include <string>

#include "base/error.h"

namespace cherenkov::engine {
namespace {

std::string message_of(std::string_view text, PoolFlag flag) {
    try {
        parse_pool_setting(text, flag);
    } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::InvalidInput);
        return e.what();
    }
    ADD_FAILURE() << "accepted '" << text << "'";
    return {};
}

TEST(PoolSetting, EachFlagTakesItsWords) {
    EXPECT_EQ(parse_pool_setting("mapped"), PoolSetting::of(PoolMode::Mapped));
    EXPECT_EQ(parse_pool_setting("max", PoolFlag::HostPool), PoolSetting::of(PoolMode::Max));
    EXPECT_EQ(parse_pool_setting("staging", PoolFlag::HostPool),
              PoolSetting::of(PoolMode::Staging));
    EXPECT_EQ(parse_pool_setting("mapped", PoolFlag::HostPool), PoolSetting::of(PoolMode::Mapped));
    EXPECT_EQ(parse_pool_setting("2.5", PoolFlag::HostPool).bytes, 2'500'000'000u);
    // Staging is the host side of a device pool: --pool-gb has no such thing.
    EXPECT_NE(message_of("staging", PoolFlag::Pool).find("--pool-gb 'staging'"), std::string::npos);
}

TEST(PoolSetting, MessagesNameTheFlagAndTheValue) {
    const std::string host = message_of("lots", PoolFlag::HostPool);
    EXPECT_NE(host.find("--host-pool-gb 'lots'"), std::string::npos) << host;
    EXPECT_NE(host.find("'staging'"), std::string::npos) << host;
    const std::string pool = message_of("1e3", PoolFlag::Pool);
    EXPECT_NE(pool.find("--pool-gb '1e3'"), std::string::npos) << pool;
    EXPECT_EQ(pool.find("'staging'"), std::string::npos) << pool;
    EXPECT_NE(message_of("1000001", PoolFlag::Pool).find("--pool-gb"), std::string::npos);
}

TEST(PoolSetting, TextReadsBackEqual) {
    for (const char* text :
         {"adaptive", "max", "mapped", "staging", "0", "20", "2.5", "0.05", "1000000", "0.1"}) {
        const PoolSetting setting = parse_pool_setting(text, PoolFlag::HostPool);
        EXPECT_EQ(pool_setting_text(setting), text);
        EXPECT_EQ(parse_pool_setting(pool_setting_text(setting), PoolFlag::HostPool), setting);
    }
    EXPECT_EQ(pool_setting_text(PoolSetting::gb(12)), "12");
}

}  // namespace
}  // namespace cherenkov::engine
