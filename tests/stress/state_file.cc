// SPDX-License-Identifier: Apache-2.0
// The --state file of stripefs-stress (see state_file.h).
#include "state_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace stress {

nlohmann::json ToJson(const State& s) {
  nlohmann::json j;
  j["version"] = 1;
  j["threads"] = s.threads;
  j["files"] = s.files;
  j["max_size"] = s.max_size;
  j["thread"] = nlohmann::json::array();
  for (const auto& ts : s.t) {
    nlohmann::json jt;
    jt["obj_reserved"] = ts.obj_reserved;
    jt["clean"] = nlohmann::json::array();
    for (const auto& [slot, r] : ts.clean) {
      nlohmann::json c{{"slot", slot}, {"name", SlotName(slot)}, {"obj", r.obj}, {"size", r.size}, {"sha256", r.sha256}};
      c["xattrs"] = r.has_xattrs ? nlohmann::json(r.xattrs) : nlohmann::json(nullptr);
      jt["clean"].push_back(c);
    }
    j["thread"].push_back(jt);
  }
  return j;
}

std::optional<State> LoadState(const std::string& path, std::string* err) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) {
    *err = fmt::format("{}: {}", path, std::strerror(errno));
    return std::nullopt;
  }
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("version", 0) != 1) {
    *err = fmt::format("{}: not a stripefs-stress state file", path);
    return std::nullopt;
  }
  try {
    State s;
    s.threads = j.at("threads").get<int>();
    s.files = j.at("files").get<int>();
    s.max_size = j.value("max_size", uint64_t{0});
    for (const auto& jt : j.at("thread")) {
      ThreadState ts;
      ts.obj_reserved = jt.at("obj_reserved").get<uint32_t>();
      for (const auto& c : jt.at("clean")) {
        CleanRecord r;
        r.obj = c.at("obj").get<uint32_t>();
        r.size = c.at("size").get<uint64_t>();
        r.sha256 = c.at("sha256").get<std::string>();
        r.has_xattrs = !c.at("xattrs").is_null();
        if (r.has_xattrs) r.xattrs = c.at("xattrs").get<std::map<std::string, std::string>>();
        ts.clean[c.at("slot").get<int>()] = std::move(r);
      }
      s.t.push_back(std::move(ts));
    }
    if (static_cast<int>(s.t.size()) != s.threads) throw std::runtime_error("thread count");
    return s;
  } catch (const std::exception& e) {
    *err = fmt::format("{}: malformed state file ({})", path, e.what());
    return std::nullopt;
  }
}

void StateFile::save_locked() {
  if (!enabled()) return;
  std::string text = ToJson(state).dump(1) + "\n";
  std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  for (size_t done = 0; ok && done < text.size();) {
    ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w <= 0) ok = false;
    else done += static_cast<size_t>(w);
  }
  if (ok) ok = ::fsync(fd) == 0;
  if (fd >= 0) ::close(fd);
  if (ok) ok = ::rename(tmp.c_str(), path.c_str()) == 0;
  if (!ok) {
    std::fprintf(stderr, "stripefs-stress: cannot write state file %s: %s\n", path.c_str(), std::strerror(errno));
    std::fflush(stderr);
    std::_Exit(2);
  }
}

}  // namespace stress
