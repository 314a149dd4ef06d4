// SPDX-License-Identifier: Apache-2.0
// stripefs layout DIR [KEY=VALUE ...]: shows, and sets, the layout attributes
// of a directory on a mounted pool (engine/pool/layout.h). The daemon refuses
// a value it cannot honour with EINVAL, and setxattr(2) has no way to carry
// the reason; so the command checks each value first with the daemon's own
// ValidateLayoutXattr, against the pool as `df` describes it, and prints the
// reason itself.
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "engine/pool/layout.h"
#include "fs/control.h"
#include "tools/commands.h"

namespace stripefs {
namespace {

// The pool as the daemon's df answer describes it: what ValidateLayoutXattr
// needs (its segments) and the layout defaults (a daemon from before they
// were in the answer leaves them out).
Result<nlohmann::json> LiveDf(const std::string& dir) {
  auto v = LiveXattr(dir, fs::kDfXattr);
  if (!v.ok()) {
    if (auto dead = DeadMountProblem(dir)) return Status::Invalid(*dead);
    return Status::Invalid(dir + " is not on a mounted stripefs pool (layouts are set through a mount)");
  }
  auto j = nlohmann::json::parse(v.value(), nullptr, false);
  if (j.is_discarded()) return Status::Invalid("the daemon's df answer is not JSON");
  return j;
}

meta::PoolConfig PoolFromDf(const nlohmann::json& df) {
  meta::PoolConfig pool;
  for (const auto& s : df.at("segments")) {
    pool.segments.push_back({s.at("id").get<uint32_t>(), s.at("kind").get<std::string>(),
                             s.at("path").get<std::string>(), s.at("capacity").get<uint64_t>()});
  }
  return pool;
}

// Sets (or, with an empty value, removes) one attribute; the message says why not.
Status Apply(const std::string& dir, const std::string& key, const std::string& value, const meta::PoolConfig& pool) {
  const std::string name = "user.stripefs." + key;
  if (value.empty()) {
    if (removexattr(dir.c_str(), name.c_str()) == 0 || errno == ENODATA) return Status::OK();
    return Status::Invalid(fmt::format("{}: cannot remove {}: {}", dir, key, strerror(errno)));
  }
  auto checked = ValidateLayoutXattr(name, value, pool);
  if (!checked.ok()) return Status::Invalid(fmt::format("{}: {}", dir, checked.status().message()));
  if (setxattr(dir.c_str(), name.c_str(), value.data(), value.size(), 0) == 0) return Status::OK();
  return Status::Invalid(fmt::format("{}: cannot set {}={}: {}", dir, key, value, strerror(errno)));
}

}  // namespace

int RunLayout(const std::string& dir, const std::vector<std::string>& settings, bool json) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) return FailMissing(dir);
  if (!S_ISDIR(st.st_mode)) {
    return Fail(fmt::format("{} is not a directory: layouts are set on directories, and a file keeps the layout it "
                            "was created with (`getfattr -n {} FILE` shows it)",
                            dir, kLayoutXattr));
  }
  auto df = LiveDf(dir);
  if (!df.ok()) return Fail(df.status());
  const meta::PoolConfig pool = PoolFromDf(df.value());
  for (const std::string& kv : settings) {  // KEY=VALUE, checked by the command line
    const size_t eq = kv.find('=');
    if (Status s = Apply(dir, kv.substr(0, eq), kv.substr(eq + 1), pool); !s.ok()) return Fail(s);
  }

  // What a file created in dir gets: dir's attributes, else the pool's defaults.
  const nlohmann::json defaults = df->value("layout", nlohmann::json::object());
  nlohmann::json out = {{"path", dir}, {"set", nlohmann::json::array()}};
  for (const char* key : {"strategy", "chunk_size", "replicas"}) {
    auto v = LiveXattr(dir, "user.stripefs." + std::string(key) + '\0');
    if (v.ok()) {
      out["set"].push_back(key);
      if (key[0] == 's') {
        out[key] = v.value();
      } else {
        out[key] = std::stoull(v.value());
      }
    } else if (defaults.contains(key)) {
      out[key] = defaults[key];
    }
  }
  if (json) {
    fmt::print("{}\n", out.dump());
    return 0;
  }
  fmt::print("{}\n", dir);
  for (const char* key : {"strategy", "chunk_size", "replicas"}) {
    if (!out.contains(key)) continue;
    const bool here = std::find(out["set"].begin(), out["set"].end(), key) != out["set"].end();
    const std::string value = key[0] == 'c' ? Human(out[key].get<uint64_t>())
                              : key[0] == 'r' ? std::to_string(out[key].get<uint32_t>())
                                              : out[key].get<std::string>();
    fmt::print("  {:<10} {:<16} {}\n", key, value, here ? "(this directory)" : "(the pool's default)");
  }
  return 0;
}

}  // namespace stripefs
