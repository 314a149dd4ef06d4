// SPDX-License-Identifier: Apache-2.0
// The -o options of `stripefs mount` (tools/mount_options.h): every option,
// every kind of wrong value and the exact message that refuses it.
#include "tools/mount_options.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace stripefs {
namespace {

Result<fs::MountOptions> Parse(std::vector<std::string> opts) {
  fs::MountOptions base;
  base.meta_dir = "/pool/meta";
  base.mountpoint = "/mnt/pool";
  base.foreground = true;
  return ParseMountOptions(opts, base);
}

fs::MountOptions Accepted(std::vector<std::string> opts) {
  auto parsed = Parse(opts);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? parsed.value() : fs::MountOptions{};
}

// The message a refused option list gets; "" (and a test failure) if it is accepted.
std::string Refusal(std::vector<std::string> opts) {
  auto parsed = Parse(opts);
  EXPECT_FALSE(parsed.ok()) << "accepted";
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), Code::kInvalidArgument);
  return parsed.status().message();
}

std::string Absolute(const std::string& path) { return (std::filesystem::current_path() / path).string(); }

TEST(MountOptionsTest, NoOptionsKeepTheBaseAndTheDefaults) {
  fs::MountOptions mo = Accepted({});
  EXPECT_EQ(mo.meta_dir, "/pool/meta");
  EXPECT_EQ(mo.mountpoint, "/mnt/pool");
  EXPECT_TRUE(mo.foreground);
  EXPECT_FALSE(mo.degraded);
  EXPECT_EQ(mo.workers, 8u);
  EXPECT_FALSE(mo.evict);
  EXPECT_DOUBLE_EQ(mo.evictor.high_watermark, 0.90);
  EXPECT_DOUBLE_EQ(mo.evictor.low_watermark, 0.80);
  EXPECT_EQ(mo.log_file, "");
  EXPECT_EQ(mo.log_level, spdlog::level::info);
  EXPECT_EQ(mo.metrics_file, "");
  EXPECT_EQ(mo.ram_cache, "s3fifo");
  EXPECT_FALSE(mo.meta_reserve.has_value());
  EXPECT_TRUE(mo.fuse_options.empty());
}

TEST(MountOptionsTest, Degraded) { EXPECT_TRUE(Accepted({"degraded"}).degraded); }

TEST(MountOptionsTest, WorkersFromOneTo256) {
  EXPECT_EQ(Accepted({"workers=1"}).workers, 1u);
  EXPECT_EQ(Accepted({"workers=256"}).workers, 256u);
  EXPECT_EQ(Accepted({"workers=016"}).workers, 16u) << "leading zeros are still decimal";
}

TEST(MountOptionsTest, WorkersOutOfRangeOrNotANumberAreRefused) {
  for (const std::string bad : {"0", "257", "", "x", "8x", "-1", "+8", " 8", "1e2", "99999999999"}) {
    EXPECT_EQ(Refusal({"workers=" + bad}), "-o workers=N needs a whole number from 1 to 256, not '" + bad + "'");
  }
}

TEST(MountOptionsTest, OnFull) {
  EXPECT_TRUE(Accepted({"on_full=evict"}).evict);
  EXPECT_FALSE(Accepted({"on_full=enospc"}).evict);
  EXPECT_FALSE(Accepted({"on_full=evict", "on_full=enospc"}).evict) << "the last one counts";
  EXPECT_EQ(Refusal({"on_full=drop"}), "-o on_full= takes evict or enospc, not 'drop'");
  EXPECT_EQ(Refusal({"on_full="}), "-o on_full= takes evict or enospc, not ''");
}

TEST(MountOptionsTest, EvictWatermarks) {
  fs::MountOptions mo = Accepted({"evict_high=95", "evict_low=50"});
  EXPECT_DOUBLE_EQ(mo.evictor.high_watermark, 0.95);
  EXPECT_DOUBLE_EQ(mo.evictor.low_watermark, 0.50);
  EXPECT_DOUBLE_EQ(Accepted({"evict_high=100"}).evictor.high_watermark, 1.0) << "only writes that find no room evict";
  EXPECT_DOUBLE_EQ(Accepted({"evict_low=1"}).evictor.low_watermark, 0.01);
  EXPECT_DOUBLE_EQ(Accepted({"evict_high=100", "evict_low=99"}).evictor.low_watermark, 0.99);
}

TEST(MountOptionsTest, EvictWatermarksOutOfRangeAreRefused) {
  for (const std::string bad : {"0", "101", "", "x", "90%"}) {
    EXPECT_EQ(Refusal({"evict_high=" + bad}), "-o evict_high=PCT needs a whole percentage from 1 to 100");
  }
  for (const std::string bad : {"0", "100", "", "x"}) {
    EXPECT_EQ(Refusal({"evict_low=" + bad}), "-o evict_low=PCT needs a whole percentage from 1 to 99");
  }
}

TEST(MountOptionsTest, EvictLowMustBeBelowEvictHigh) {
  EXPECT_EQ(Refusal({"evict_low=90"}), "-o evict_low must be below evict_high") << "against the default high of 90";
  EXPECT_EQ(Refusal({"evict_high=50", "evict_low=60"}), "-o evict_low must be below evict_high");
  EXPECT_EQ(Refusal({"evict_low=60", "evict_high=50"}), "-o evict_low must be below evict_high")
      << "checked after all options, whatever their order";
  EXPECT_EQ(Refusal({"evict_high=70"}), "-o evict_low must be below evict_high") << "against the default low of 80";
}

TEST(MountOptionsTest, LogFileIsMadeAbsolute) {
  EXPECT_EQ(Accepted({"log=/var/log/stripefs.log"}).log_file, "/var/log/stripefs.log");
  EXPECT_EQ(Accepted({"log=logs/pool.log"}).log_file, Absolute("logs/pool.log")) << "the daemon runs in /";
  EXPECT_EQ(Refusal({"log="}), "-o log=FILE needs a file name");
}

TEST(MountOptionsTest, StateDirIsMadeAbsolute) {
  EXPECT_EQ(Accepted({"state=/var/lib/stripefs/pool1"}).state_dir, "/var/lib/stripefs/pool1");
  EXPECT_EQ(Accepted({"state=run/pool1"}).state_dir, Absolute("run/pool1")) << "the daemon runs in /";
  EXPECT_EQ(Accepted({}).state_dir, "") << "unset: the daemon picks the pool's default";
  EXPECT_EQ(Refusal({"state="}), "-o state=DIR needs a directory");
}

TEST(MountOptionsTest, LogLevelTakesSpdlogNames) {
  EXPECT_EQ(Accepted({"log_level=trace"}).log_level, spdlog::level::trace);
  EXPECT_EQ(Accepted({"log_level=debug"}).log_level, spdlog::level::debug);
  EXPECT_EQ(Accepted({"log_level=info"}).log_level, spdlog::level::info);
  EXPECT_EQ(Accepted({"log_level=warning"}).log_level, spdlog::level::warn);
  EXPECT_EQ(Accepted({"log_level=warn"}).log_level, spdlog::level::warn);
  EXPECT_EQ(Accepted({"log_level=error"}).log_level, spdlog::level::err);
  EXPECT_EQ(Accepted({"log_level=err"}).log_level, spdlog::level::err);
  EXPECT_EQ(Accepted({"log_level=critical"}).log_level, spdlog::level::critical);
  EXPECT_EQ(Accepted({"log_level=off"}).log_level, spdlog::level::off);
}

TEST(MountOptionsTest, UnknownLogLevelIsRefused) {
  const std::string takes = "-o log_level= takes trace, debug, info, warning, error or critical, not ";
  EXPECT_EQ(Refusal({"log_level=verbose"}), takes + "'verbose'");
  EXPECT_EQ(Refusal({"log_level="}), takes + "''");
  EXPECT_EQ(Refusal({"log_level=INFO"}), takes + "'INFO'");
}

TEST(MountOptionsTest, MetricsFileIsMadeAbsolute) {
  EXPECT_EQ(Accepted({"metrics=/run/stripefs.prom"}).metrics_file, "/run/stripefs.prom");
  EXPECT_EQ(Accepted({"metrics=pool.prom"}).metrics_file, Absolute("pool.prom"));
  EXPECT_EQ(Refusal({"metrics="}), "-o metrics=FILE needs a file name");
}

TEST(MountOptionsTest, MetricsListenIsLoopbackUnlessAHostIsNamed) {
  EXPECT_EQ(Accepted({"metrics_listen=9567"}).metrics_listen, "127.0.0.1:9567");
  EXPECT_EQ(Accepted({"metrics_listen=0.0.0.0:9567"}).metrics_listen, "0.0.0.0:9567");
  EXPECT_EQ(Accepted({"metrics_listen=[::1]:9567"}).metrics_listen, "[::1]:9567");
  EXPECT_EQ(Accepted({}).metrics_listen, "");
  for (const char* bad : {"metrics_listen=", "metrics_listen=0", "metrics_listen=65536", "metrics_listen=host:",
                          "metrics_listen=:80", "metrics_listen=::1:80", "metrics_listen=http"}) {
    EXPECT_EQ(Refusal({bad}).rfind("-o metrics_listen= takes PORT (on 127.0.0.1), HOST:PORT or [IPV6]:PORT", 0), 0u)
        << bad;
  }
}

TEST(MountOptionsTest, RamCache) {
  EXPECT_EQ(Accepted({"ram_cache=s3fifo"}).ram_cache, "s3fifo");
  EXPECT_EQ(Accepted({"ram_cache=lru"}).ram_cache, "lru");
  EXPECT_EQ(Accepted({"ram_cache=off"}).ram_cache, "off");
  EXPECT_EQ(Refusal({"ram_cache=arc"}), "-o ram_cache= takes s3fifo, lru or off, not 'arc'");
  EXPECT_EQ(Refusal({"ram_cache="}), "-o ram_cache= takes s3fifo, lru or off, not ''");
}

TEST(MountOptionsTest, MetaReserveTakesASize) {
  EXPECT_EQ(Accepted({"meta_reserve=0"}).meta_reserve, 0u);
  EXPECT_EQ(Accepted({"meta_reserve=4096"}).meta_reserve, 4096u);
  EXPECT_EQ(Accepted({"meta_reserve=64K"}).meta_reserve, 64u << 10);
  EXPECT_EQ(Accepted({"meta_reserve=128M"}).meta_reserve, 128u << 20);
  EXPECT_EQ(Accepted({"meta_reserve=2G"}).meta_reserve, 2ull << 30);
  EXPECT_EQ(Accepted({"meta_reserve=1T"}).meta_reserve, 1ull << 40);
  EXPECT_EQ(Accepted({"meta_reserve=16MiB"}).meta_reserve, 16u << 20);
}

TEST(MountOptionsTest, BadMetaReserveIsRefusedWithTheSizeError) {
  EXPECT_EQ(Refusal({"meta_reserve="}), "-o meta_reserve=SIZE: empty size");
  EXPECT_EQ(Refusal({"meta_reserve=M"}), "-o meta_reserve=SIZE: size 'M' does not start with a number");
  EXPECT_EQ(Refusal({"meta_reserve=12Q"}), "-o meta_reserve=SIZE: size '12Q' has an unknown suffix (use K, M, G or T)");
  EXPECT_EQ(Refusal({"meta_reserve=99999999999999999999T"}),
            "-o meta_reserve=SIZE: size '99999999999999999999T' is too large");
}

TEST(MountOptionsTest, AtimeFlagsChooseHowReadsMoveAtime) {
  // stripefs keeps atime itself; FUSE would refuse all but noatime.
  EXPECT_EQ(Accepted({}).atime, fs::AtimeMode::kRelative);
  EXPECT_EQ(Accepted({"relatime", "lazytime", "nodiratime"}).atime, fs::AtimeMode::kRelative);
  EXPECT_TRUE(Accepted({"relatime", "strictatime", "lazytime", "nodiratime"}).fuse_options.empty());
  EXPECT_EQ(Accepted({"strictatime"}).atime, fs::AtimeMode::kEveryRead);
  EXPECT_EQ(Accepted({"noatime", "relatime"}).atime, fs::AtimeMode::kNever);  // as the kernel ranks them
  EXPECT_EQ(Accepted({"noatime", "relatime"}).fuse_options, std::vector<std::string>{"noatime"});
  fs::MountOptions strict = Accepted({"noatime", "strictatime"});
  EXPECT_EQ(strict.atime, fs::AtimeMode::kEveryRead);
  EXPECT_TRUE(strict.fuse_options.empty());
}

TEST(MountOptionsTest, DefaultsRwAndEmptyAreDropped) {
  EXPECT_TRUE(Accepted({"defaults", "rw", ""}).fuse_options.empty());
}

TEST(MountOptionsTest, EverythingElseGoesToFuseInOrder) {
  fs::MountOptions mo = Accepted({"ro", "degraded", "allow_other", "workers=4", "noatime", "no_such_option"});
  EXPECT_EQ(mo.fuse_options, (std::vector<std::string>{"ro", "allow_other", "no_such_option", "noatime"}));
  EXPECT_TRUE(mo.degraded);
  EXPECT_EQ(mo.workers, 4u);
}

TEST(MountOptionsTest, TheFirstWrongOptionIsTheOneReported) {
  EXPECT_EQ(Refusal({"ro", "workers=0", "on_full=drop"}), "-o workers=N needs a whole number from 1 to 256, not '0'");
}

}  // namespace
}  // namespace stripefs
