// What the subcommands share (see tools/commands.h).
#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>

#include "engine/pool/pool.h"
#include "fs/control.h"
#include "tools/commands.h"

namespace stripefs {

int Fail(const std::string& msg) {
  std::cerr << "stripefs: " << msg << "\n";
  return 1;
}
int Fail(const Status& s) { return Fail(s.message()); }

// PATH or PATH:SIZE.
Result<DriveSpec> ParseDriveSpec(const std::string& text) {
  DriveSpec spec;
  spec.path = text;
  auto colon = text.rfind(':');
  if (colon != std::string::npos) {
    spec.path = text.substr(0, colon);
    auto size = ParseSize(text.substr(colon + 1));
    if (!size.ok()) return Status::Invalid(fmt::format("{}: {}", text, size.status().message()));
    if (size.value() == 0) return Status::Invalid(fmt::format("{}: size must be above zero", text));
    spec.size = size.value();
  }
  if (spec.path.empty()) return Status::Invalid(fmt::format("{}: no path", text));
  return spec;
}

Result<std::string> LiveXattr(const std::string& path, std::string_view name, size_t initial) {
  std::string value(initial, '\0');
  for (;;) {
    ssize_t n = getxattr(path.c_str(), name.data(), value.data(), value.size());
    if (n >= 0) {
      value.resize(static_cast<size_t>(n));
      return value;
    }
    if (errno == ERANGE) {
      value.resize(value.size() * 4);
      continue;
    }
    return Status(errno == ENOENT ? Code::kNotFound : Code::kNotSupported, strerror(errno));
  }
}

std::string Human(uint64_t b) {
  const char* units[] = {"B", "K", "M", "G", "T"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? fmt::format("{}B", b) : fmt::format("{:.1f}{}", v, units[u]);
}

}  // namespace stripefs
