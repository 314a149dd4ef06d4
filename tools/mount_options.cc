// SPDX-License-Identifier: Apache-2.0
// The -o options of `stripefs mount` (see mount_options.h).
#include "tools/mount_options.h"

#include <fmt/format.h>

#include <unistd.h>

#include <filesystem>
#include <optional>

#include "engine/pool/pool.h"  // ParseSize
#include "fs/fuse_ring.h"     // RingAvailable

namespace stripefs {
namespace {

// A whole number in [lo, hi] written in decimal, nothing else.
std::optional<unsigned> ParseCount(const std::string& text, unsigned lo, unsigned hi) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  unsigned long v = std::stoul(text);
  if (v < lo || v > hi) return std::nullopt;
  return static_cast<unsigned>(v);
}

// -o metrics_listen=: PORT (loopback, so the metrics are not exposed by
// accident), HOST:PORT or [IPV6]:PORT; answered as HOST:PORT.
Result<std::string> ParseListenAddress(const std::string& text) {
  const size_t colon = text.rfind(':');
  std::string host = colon == std::string::npos ? "127.0.0.1" : text.substr(0, colon);
  const std::string port = colon == std::string::npos ? text : text.substr(colon + 1);
  const bool v6 = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (!ParseCount(port, 1, 65535) || host.empty() || (!v6 && host.find_first_of(":[]") != std::string::npos)) {
    return Status::Invalid(fmt::format("-o metrics_listen= takes PORT (on 127.0.0.1), HOST:PORT or [IPV6]:PORT, "
                                       "with PORT from 1 to 65535, not '{}'",
                                       text));
  }
  return host + ":" + port;
}

}  // namespace

Result<fs::MountOptions> ParseMountOptions(const std::vector<std::string>& opts, fs::MountOptions mo) {
  bool strict = false, noatime = false;
  for (const auto& o : opts) {
    if (o == "degraded") {
      mo.degraded = true;
    } else if (o.rfind("workers=", 0) == 0) {
      auto n = ParseCount(o.substr(8), 1, 256);
      if (!n) return Status::Invalid(fmt::format("-o workers=N needs a whole number from 1 to 256, not '{}'", o.substr(8)));
      mo.workers = *n;
    } else if (o.rfind("transport=", 0) == 0) {
      const std::string v = o.substr(10);
      if (v != "uring" && v != "dev") return Status::Invalid(fmt::format("-o transport= takes uring or dev, not '{}'", v));
      std::string why;
      if (v == "uring" && !fs::RingAvailable(&why)) return Status::Invalid("-o transport=uring: " + why);
      mo.transport = v == "uring" ? fs::Transport::kUring : fs::Transport::kDev;
    } else if (o.rfind("on_full=", 0) == 0) {
      const std::string v = o.substr(8);
      if (v != "evict" && v != "enospc") return Status::Invalid(fmt::format("-o on_full= takes evict or enospc, not '{}'", v));
      mo.evict = v == "evict";
    } else if (o.rfind("evict_high=", 0) == 0 || o.rfind("evict_low=", 0) == 0) {
      const bool high = o[6] == 'h';
      // evict_high=100: no background eviction; only a write that finds no room evicts.
      auto pct = ParseCount(o.substr(high ? 11 : 10), 1, high ? 100 : 99);
      if (!pct) {
        return Status::Invalid(fmt::format("-o {}PCT needs a whole percentage from 1 to {}", o.substr(0, high ? 11 : 10),
                                           high ? 100 : 99));
      }
      (high ? mo.evictor.high_watermark : mo.evictor.low_watermark) = *pct / 100.0;
    } else if (o.rfind("log=", 0) == 0) {
      if (o.size() == 4) return Status::Invalid("-o log=FILE needs a file name");
      std::error_code ec;
      mo.log_file = std::filesystem::absolute(o.substr(4), ec).string();  // the daemon runs in /
    } else if (o.rfind("state=", 0) == 0) {
      if (o.size() == 6) return Status::Invalid("-o state=DIR needs a directory");
      std::error_code ec;
      mo.state_dir = std::filesystem::absolute(o.substr(6), ec).string();
    } else if (o.rfind("log_level=", 0) == 0) {
      mo.log_level = spdlog::level::from_str(o.substr(10));
      if (mo.log_level == spdlog::level::off && o.substr(10) != "off") {  // from_str's answer to a name it does not know
        return Status::Invalid(fmt::format(
            "-o log_level= takes trace, debug, info, warning, error or critical, not '{}'", o.substr(10)));
      }
    } else if (o.rfind("metrics=", 0) == 0) {
      if (o.size() == 8) return Status::Invalid("-o metrics=FILE needs a file name");
      std::error_code ec;
      mo.metrics_file = std::filesystem::absolute(o.substr(8), ec).string();  // the daemon runs in /
    } else if (o.rfind("metrics_listen=", 0) == 0) {
      auto listen = ParseListenAddress(o.substr(15));
      if (!listen.ok()) return listen.status();
      mo.metrics_listen = listen.value();
    } else if (o.rfind("ram_cache=", 0) == 0) {
      mo.ram_cache = o.substr(10);
      if (mo.ram_cache != "s3fifo" && mo.ram_cache != "lru" && mo.ram_cache != "off") {
        return Status::Invalid(fmt::format("-o ram_cache= takes s3fifo, lru or off, not '{}'", mo.ram_cache));
      }
    } else if (o.rfind("meta_reserve=", 0) == 0) {
      auto size = ParseSize(o.substr(13));
      if (!size.ok()) return Status::Invalid("-o meta_reserve=SIZE: " + size.status().message());
      mo.meta_reserve = size.value();
    } else if (o == "noatime" || o == "relatime" || o == "strictatime") {
      // stripefs keeps atime itself (the kernel leaves it to a FUSE server).
      // As the kernel ranks them: strictatime over noatime over relatime.
      if (o == "strictatime") {
        strict = true;
      } else if (o == "noatime") {
        noatime = true;
      }
    } else if (o == "lazytime" || o == "nodiratime") {
      // FUSE refuses these; atime is stored with the inode as it changes.
    } else if (o == "remount") {
      mo.remount = true;
    } else if (o == "nonempty") {
      mo.nonempty = true;  // checked by `stripefs mount` itself: libfuse 3 no longer knows it
    } else if (o == "rw") {
      mo.read_only = false;
    } else if ((o == "suid" || o == "dev") && geteuid() != 0) {
      // fusermount3 would drop them without a word; say so instead.
      return Status(Code::kPermission,
                    fmt::format("-o {} needs root: a mount by uid {} is always nosuid,nodev (set-user-ID files "
                                "and device nodes on it would let its owner past the system's permissions)",
                                o, geteuid()));
    } else if (o != "defaults" && !o.empty()) {
      if (o == "ro") mo.read_only = true;
      mo.fuse_options.push_back(o);
    }
  }
  mo.atime = strict ? fs::AtimeMode::kEveryRead : noatime ? fs::AtimeMode::kNever : fs::AtimeMode::kRelative;
  // The kernel's noatime flag too, so the mount shows it (FUSE refuses the other two).
  if (mo.atime == fs::AtimeMode::kNever) mo.fuse_options.push_back("noatime");
  if (mo.evictor.low_watermark >= mo.evictor.high_watermark) {
    return Status::Invalid("-o evict_low must be below evict_high");
  }
  return mo;
}

}  // namespace stripefs
