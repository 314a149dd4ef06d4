// SPDX-License-Identifier: Apache-2.0
// See pool_fixture.h.
#include "pool_fixture.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

extern char** environ;

namespace stripefs::bench {
namespace {

namespace fs = std::filesystem;

struct MountRecord {
  std::string meta, mnt;
  pid_t daemon = 0;
};

struct CleanupState {
  std::mutex mu;
  std::string program = "bench";
  std::vector<MountRecord> mounts;    // GUARDED_BY(mu): mounted and not yet unmounted
  std::vector<std::string> workdirs;  // GUARDED_BY(mu)
};

CleanupState& State() {
  static auto* state = new CleanupState;  // never destroyed: the signal thread may use it at any time
  return *state;
}

bool IsMounted(const std::string& path) {
  std::error_code ec;
  const std::string canon = fs::weakly_canonical(path, ec).string();
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, devno, root, mnt;
    ls >> id >> parent >> devno >> root >> mnt;
    if (mnt == canon) return true;
  }
  return false;
}

// A zombie or a missing /proc entry counts as gone.
bool PidAlive(pid_t pid) {
  std::ifstream in(fmt::format("/proc/{}/stat", pid));
  std::string line;
  if (!std::getline(in, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

bool WaitPidGone(pid_t pid, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (PidAlive(pid)) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

pid_t ReadDaemonPid(const std::string& meta) {
  std::ifstream in(meta + "/daemon.pid");
  long pid = 0;
  in >> pid;
  return static_cast<pid_t>(pid);
}

// Points every fd of this process that is open inside mnt at /dev/null
// instead: on an error or a signal the benchmark may still hold files there,
// which would keep the mount busy (and its daemon alive) until we exit.
void DropFdsUnder(const std::string& mnt) {
  std::error_code ec;
  std::vector<int> fds;
  for (const auto& e : fs::directory_iterator("/proc/self/fd", ec)) {
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (!ec && (target == mnt || target.rfind(mnt + "/", 0) == 0)) fds.push_back(std::stoi(e.path().filename()));
  }
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  for (int fd : fds) dup2(null_fd, fd);  // dup2, not close: the fd number stays taken, so nothing reuses it
  if (null_fd >= 0) close(null_fd);
}

// Unmounts m and waits for its daemon; false (with a message) when it could not.
// With drop_fds (cleanup after an error or a signal), our own files in the
// mount are let go after a second of EBUSY. The lazy detach is the last
// resort so that nothing is left mounted.
bool UnmountRecord(const MountRecord& m, bool drop_fds, std::string* problem) {
  const auto start = Clock::now();
  const auto until = start + std::chrono::seconds(10);
  bool dropped = false;
  while (IsMounted(m.mnt)) {
    if (umount2(m.mnt.c_str(), 0) == 0) break;
    if (errno == EBUSY && drop_fds && !dropped && Clock::now() > start + std::chrono::seconds(1)) {
      DropFdsUnder(fs::weakly_canonical(m.mnt).string());
      dropped = true;
      continue;
    }
    if (errno != EBUSY || Clock::now() > until) {
      *problem = fmt::format("umount {}: {}; detaching it lazily", m.mnt, std::strerror(errno));
      umount2(m.mnt.c_str(), MNT_DETACH);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the kernel is still releasing files
  }
  if (m.daemon > 0 && !WaitPidGone(m.daemon, std::chrono::seconds(30))) {
    *problem += fmt::format("{}stripefs daemon {} did not exit 30 s after its unmount; killed",
                            problem->empty() ? "" : "; ", m.daemon);
    kill(m.daemon, SIGKILL);
    WaitPidGone(m.daemon, std::chrono::seconds(10));
  }
  return problem->empty() && !IsMounted(m.mnt);
}

// Set once a signal's cleanup starts: errors the benchmark then meets (its
// files in the mount let go) are consequences, not news.
std::atomic<bool> g_signalled{false};

void SignalThread(sigset_t set) {
  int sig = 0;
  if (sigwait(&set, &sig) != 0) return;
  g_signalled = true;
  fmt::print(stderr, "{}: signal {}: cleaning up\n", State().program, sig);
  Cleanup();
  _exit(128 + sig);
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

void InitBench(const char* program) {
  State().program = program;
  static sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(SignalThread, set).detach();
}

void Die(const std::string& what) {
  if (g_signalled) {
    for (;;) pause();  // the signal thread cleans up and exits
  }
  std::fflush(stdout);
  fmt::print(stderr, "{}: {}\n", State().program, what);
  Cleanup();
  std::fflush(stderr);
  _exit(1);  // without destructors: pools' background threads may still run
}

void DieErrno(const std::string& what) { Die(fmt::format("{}: {}", what, std::strerror(errno))); }

void Cleanup() {
  CleanupState& st = State();
  std::lock_guard lock(st.mu);
  bool left_mounted = false;
  for (const MountRecord& m : st.mounts) {
    std::string problem;
    if (!UnmountRecord(m, /*drop_fds=*/true, &problem)) fmt::print(stderr, "{}: cleanup: {}\n", st.program, problem);
    left_mounted = left_mounted || IsMounted(m.mnt);
  }
  st.mounts.clear();
  for (const std::string& dir : st.workdirs) {
    // remove_all would walk into a mount that is still there and delete through it.
    if (left_mounted) {
      fmt::print(stderr, "{}: cleanup: a mount under {} is still present; not removing it\n", st.program, dir);
      continue;
    }
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (ec) fmt::print(stderr, "{}: cleanup: cannot remove {}: {}\n", st.program, dir, ec.message());
  }
  st.workdirs.clear();
}

std::string Backing::describe() const {
  return fmt::format("{} ({} on {}, mounted from {})", workdir, fs_type, parent, source);
}

Backing MakeBacking(const std::string& kind, const std::string& parent_override, const char* program) {
  Backing b;
  b.kind = kind;
  if (!parent_override.empty()) {
    b.parent = parent_override;
  } else if (kind == "tmpfs") {
    b.parent = "/dev/shm";
  } else if (kind == "disk") {
    b.parent = "/var/tmp";
  } else {
    Die(fmt::format("--backing takes tmpfs or disk, not '{}'", kind));
  }
  std::error_code ec;
  fs::create_directories(b.parent, ec);
  std::string templ = fmt::format("{}/{}.XXXXXX", b.parent, program);
  if (!mkdtemp(templ.data())) DieErrno("mkdtemp " + templ);
  b.workdir = templ;
  {
    std::lock_guard lock(State().mu);
    State().workdirs.push_back(b.workdir);
  }
  // The mount holding the work directory: the longest mount point that prefixes it.
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  size_t best = 0;
  const std::string canon = fs::canonical(b.workdir).string();
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, devno, root, mnt;
    ls >> id >> parent >> devno >> root >> mnt;
    const bool prefix = canon.compare(0, mnt.size(), mnt) == 0 &&
                        (mnt == "/" || canon.size() == mnt.size() || canon[mnt.size()] == '/');
    const size_t dash = line.find(" - ");
    if (!prefix || dash == std::string::npos || mnt.size() + 1 <= best) continue;
    best = mnt.size() + 1;
    std::istringstream tail(line.substr(dash + 3));
    tail >> b.fs_type >> b.source;
  }
  if (kind == "tmpfs" && b.fs_type != "tmpfs") {
    fmt::print(stderr, "{}: warning: --backing tmpfs but {} is on {}\n", program, b.parent, b.fs_type);
  }
  return b;
}

std::string FindStripefs(const std::string& explicit_path) {
  if (!explicit_path.empty()) return explicit_path;
  if (const char* env = std::getenv("STRIPEFS"); env && *env) return env;
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path sibling = self.parent_path().parent_path() / "tools" / "stripefs";
    if (fs::exists(sibling, ec)) return sibling.string();
  }
  return "stripefs";
}

int RunCommand(const std::vector<std::string>& argv, const std::string& log_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  // The child must not inherit our blocked signals: a daemon it starts would ignore SIGTERM.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

namespace {
std::string Tail(const std::string& path, size_t max_bytes = 2000) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return Trim(all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all);
}
}  // namespace

PoolDir MakePool(const std::string& stripefs, const std::string& dir, const PoolSpec& spec) {
  PoolDir p{dir, dir + "/meta", dir + "/mnt"};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) Die(fmt::format("mkdir {}: {}", dir, ec.message()));
  std::vector<std::string> argv = {stripefs, "mkfs", "--meta", p.meta};
  for (int i = 0; i < spec.drives; ++i) {
    argv.push_back("--drive");
    argv.push_back(fmt::format("{}/drive{}.img:{}", dir, i, spec.drive_size));
  }
  if (spec.ram > 0) {
    argv.push_back("--ram");
    argv.push_back(std::to_string(spec.ram));
  }
  const std::string log = dir + "/mkfs.log";
  if (RunCommand(argv, log) != 0) Die(fmt::format("stripefs mkfs in {} failed: {}", dir, Tail(log)));
  return p;
}

void Mount(const std::string& stripefs, const PoolDir& pool, const std::string& opts) {
  std::error_code ec;
  fs::create_directories(pool.mnt, ec);
  std::vector<std::string> argv = {stripefs, "mount", pool.meta, pool.mnt};
  if (!opts.empty()) {
    argv.push_back("-o");
    argv.push_back(opts);
  }
  const std::string log = pool.dir + "/mount.log";
  // Registered before it exists, so that a signal during the mount still unmounts it.
  {
    std::lock_guard lock(State().mu);
    State().mounts.push_back({pool.meta, pool.mnt, 0});
  }
  const int rc = RunCommand(argv, log);
  const pid_t pid = ReadDaemonPid(pool.meta);
  {
    std::lock_guard lock(State().mu);
    for (MountRecord& m : State().mounts) {
      if (m.mnt == pool.mnt) m.daemon = pid;
    }
  }
  if (rc != 0 || !IsMounted(pool.mnt)) {
    Die(fmt::format("stripefs mount {} {} failed (exit {}): {} {}", pool.meta, pool.mnt, rc, Tail(log),
                    Tail(pool.meta + "/stripefs.log")));
  }
}

void Unmount(const PoolDir& pool) {
  MountRecord rec;
  {
    std::lock_guard lock(State().mu);
    auto& ms = State().mounts;
    auto it = std::find_if(ms.begin(), ms.end(), [&](const MountRecord& m) { return m.mnt == pool.mnt; });
    if (it == ms.end()) return;
    rec = *it;
    ms.erase(it);
  }
  std::string problem;
  if (!UnmountRecord(rec, /*drop_fds=*/false, &problem)) Die(fmt::format("unmount of {}: {}", pool.mnt, problem));
}

void RemovePool(const PoolDir& pool) {
  if (IsMounted(pool.mnt)) Die(fmt::format("{} is still mounted", pool.mnt));
  std::error_code ec;
  fs::remove_all(pool.dir, ec);
  if (ec) Die(fmt::format("cannot remove {}: {}", pool.dir, ec.message()));
}

uint64_t ParseSize(const std::string& text, const std::string& what) {
  if (text.empty()) Die(what + ": empty size");
  size_t pos = 0;
  uint64_t v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (...) {
    Die(fmt::format("{}: bad size '{}'", what, text));
  }
  const std::string unit = text.substr(pos);
  uint64_t mul = 1;
  if (unit == "K" || unit == "k")
    mul = kKiB;
  else if (unit == "M" || unit == "m")
    mul = kMiB;
  else if (unit == "G" || unit == "g")
    mul = kGiB;
  else if (unit == "T" || unit == "t")
    mul = kGiB * 1024;
  else if (!unit.empty())
    Die(fmt::format("{}: bad size '{}' (units K, M, G, T)", what, text));
  return v * mul;
}

std::string Bytes(uint64_t b) {
  if (b >= kGiB && b % kGiB == 0) return fmt::format("{} GiB", b / kGiB);
  if (b >= kGiB) return fmt::format("{:.2f} GiB", static_cast<double>(b) / kGiB);
  if (b >= kMiB && b % kMiB == 0) return fmt::format("{} MiB", b / kMiB);
  if (b >= kMiB) return fmt::format("{:.1f} MiB", static_cast<double>(b) / kMiB);
  if (b >= kKiB && b % kKiB == 0) return fmt::format("{} KiB", b / kKiB);
  return fmt::format("{} B", b);
}

Summary Summarize(std::vector<uint64_t> ns) {
  Summary s;
  s.count = ns.size();
  if (ns.empty()) return s;
  std::sort(ns.begin(), ns.end());
  // Nearest rank: the value at or below which p % of the samples lie.
  auto pct = [&](double p) {
    size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(ns.size())));
    return static_cast<double>(ns[std::clamp<size_t>(rank, 1, ns.size()) - 1]) / 1000.0;
  };
  long double sum = 0;
  for (uint64_t v : ns) sum += v;
  s.p50_us = pct(50);
  s.p90_us = pct(90);
  s.p99_us = pct(99);
  s.mean_us = static_cast<double>(sum / ns.size()) / 1000.0;
  s.min_us = static_cast<double>(ns.front()) / 1000.0;
  s.max_us = static_cast<double>(ns.back()) / 1000.0;
  return s;
}

double LoadAverage() {
  double l[1] = {0};
  return getloadavg(l, 1) == 1 ? l[0] : -1;
}

std::string MachineLine() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "?";
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      model = Trim(line.substr(line.find(':') + 2));
      break;
    }
  }
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return fmt::format("{}, {}, {} CPUs ({}), load average {:.2f}", when, host, std::thread::hardware_concurrency(),
                     model, LoadAverage());
}

}  // namespace stripefs::bench
