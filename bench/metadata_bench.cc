// SPDX-License-Identifier: Apache-2.0
// metadata_bench: file create, stat, readdir and unlink rates of one or more
// directories (a plain directory on the backing, a stripefs mount, a mergerfs
// mount, ...), measured the same way on each, interleaved.
//
// For each run and each target (in an order rotated by one every run, so that
// drift on a shared machine hits every target alike) it makes a fresh
// subdirectory of the target and, with plain POSIX calls:
//   create   N empty files: open(O_CREAT|O_EXCL) + close;
//   stat     all N by full path, in a shuffled order (fixed seed, the same
//            permutation for every target and run), checking each is an empty
//            regular file;
//   readdir  the subdirectory to the end, counting entries (N + 2, or N if
//            the filesystem returns no dot entries; anything else fails), then,
//            untimed, once more to check every name appears exactly once;
//   unlink   all N, in creation order;
//   rmdir    the subdirectory (timed, reported in the JSON only).
// With --threads T > 1, create, stat and unlink split the files into T
// contiguous slices, one thread each, all in the same directory.
//
// Any failed call stops the run, removes what it created and exits non-zero
// with the call, the path and the errno. It is a measuring tool, not a test.
#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <linux/magic.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <latch>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace stripefs::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kPhases = 4;
constexpr const char* kPhaseNames[kPhases] = {"create", "stat", "readdir", "unlink"};
enum Phase { kCreate, kStat, kReaddir, kUnlink };

// Set by SIGINT/SIGTERM or by the first failed call; every worker checks it
// before each operation, so a run stops promptly and can clean up.
std::atomic<bool> g_stop{false};
volatile sig_atomic_t g_interrupted = 0;

void OnSignal(int) {
  g_interrupted = 1;
  g_stop.store(true, std::memory_order_relaxed);
}

std::string ErrnoText(int err) {
  const char* name = strerrorname_np(err);
  const char* desc = strerrordesc_np(err);
  return fmt::format("{} ({})", name ? name : fmt::format("errno {}", err), desc ? desc : "unknown error");
}

// The first failure of a run, from whichever thread saw it.
class Failure {
 public:
  void set(std::string message) {
    std::lock_guard lock(mu_);
    if (message_.empty()) message_ = std::move(message);
    g_stop.store(true, std::memory_order_relaxed);
  }
  void syscall(const char* call, const std::string& path, int err) {
    set(fmt::format("{} {}: {}", call, path, ErrnoText(err)));
  }
  std::string message() {
    std::lock_guard lock(mu_);
    if (message_.empty() && g_interrupted) return "interrupted";
    return message_;
  }

 private:
  std::mutex mu_;
  std::string message_;
};

struct Target {
  std::string label;
  std::string path;
  std::string fstype;
};

// Seconds per phase, plus what readdir saw, for one target in one run.
struct Sample {
  int run = 0;
  int position = 0;  // 0 = measured first in its run
  double seconds[kPhases] = {};
  double rmdir_seconds = 0;
  uint64_t readdir_entries = 0;  // including "." and ".." when returned
  bool dot_entries = false;
};

std::string FsType(const std::string& path) {
  struct statfs st;
  if (statfs(path.c_str(), &st) != 0) return "?";
  switch (static_cast<unsigned long>(st.f_type)) {
    case TMPFS_MAGIC:
      return "tmpfs";
    case FUSE_SUPER_MAGIC:
      return "fuse";
    case EXT4_SUPER_MAGIC:
      return "ext4";
    case XFS_SUPER_MAGIC:
      return "xfs";
    case BTRFS_SUPER_MAGIC:
      return "btrfs";
    case OVERLAYFS_SUPER_MAGIC:
      return "overlay";
    case NFS_SUPER_MAGIC:
      return "nfs";
    default:
      return fmt::format("0x{:x}", static_cast<unsigned long>(st.f_type));
  }
}

// "LABEL=PATH" or just "PATH" (labelled by itself). A '=' after a '/' belongs
// to the path.
Target ParseTarget(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq != std::string::npos && eq > 0 && arg.find('/') > eq) return {arg.substr(0, eq), arg.substr(eq + 1), ""};
  return {arg, arg, ""};
}

std::string FileName(uint64_t i) { return fmt::format("f{:07}", i); }

// Runs body(lo, hi) over [0, n) split into `threads` contiguous slices, each on
// its own thread, and returns the wall time from the moment all threads are
// released to the last one finishing.
double TimeSlices(int threads, uint64_t n, const std::function<void(uint64_t, uint64_t)>& body) {
  if (threads == 1) {
    const auto start = Clock::now();
    body(0, n);
    return std::chrono::duration<double>(Clock::now() - start).count();
  }
  std::latch go(1);
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    const uint64_t lo = n * t / threads, hi = n * (t + 1) / threads;
    workers.emplace_back([&, lo, hi] {
      go.wait();
      body(lo, hi);
    });
  }
  const auto start = Clock::now();
  go.count_down();
  for (auto& w : workers) w.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One target in one run: a fresh subdirectory and the N files in it.
class Trial {
 public:
  Trial(std::string subdir, uint64_t files, int threads, const std::vector<uint32_t>& order)
      : subdir_(std::move(subdir)), files_(files), threads_(threads), order_(order) {
    paths_.reserve(files);
    for (uint64_t i = 0; i < files; ++i) paths_.push_back(subdir_ + "/" + FileName(i));
  }

  // Runs every phase into *sample. On failure returns false with the reason in
  // failure(); the caller then calls Cleanup().
  bool Run(Sample* sample) {
    if (g_stop.load()) return false;
    if (mkdir(subdir_.c_str(), 0755) != 0) {
      failure_.syscall("mkdir", subdir_, errno);
      return false;
    }
    made_subdir_ = true;

    sample->seconds[kCreate] = TimeSlices(threads_, files_, [this](uint64_t lo, uint64_t hi) { Create(lo, hi); });
    if (g_stop.load()) return false;
    sample->seconds[kStat] = TimeSlices(threads_, files_, [this](uint64_t lo, uint64_t hi) { Stat(lo, hi); });
    if (g_stop.load()) return false;

    const auto start = Clock::now();
    uint64_t entries = 0, dots = 0;
    if (!CountEntries(&entries, &dots)) return false;
    sample->seconds[kReaddir] = std::chrono::duration<double>(Clock::now() - start).count();
    sample->readdir_entries = entries;
    sample->dot_entries = dots == 2;
    if (!(entries == files_ + 2 && dots == 2) && !(entries == files_ && dots == 0)) {
      failure_.set(fmt::format(
          "readdir {}: {} entries ({} of them \".\"/\"..\"), expected {} files plus both or neither dot entry", subdir_,
          entries, dots, files_));
      return false;
    }
    if (!CheckNames()) return false;

    sample->seconds[kUnlink] = TimeSlices(threads_, files_, [this](uint64_t lo, uint64_t hi) { Unlink(lo, hi); });
    if (g_stop.load()) return false;

    const auto rmdir_start = Clock::now();
    if (rmdir(subdir_.c_str()) != 0) {
      failure_.syscall("rmdir", subdir_, errno);
      return false;
    }
    sample->rmdir_seconds = std::chrono::duration<double>(Clock::now() - rmdir_start).count();
    made_subdir_ = false;
    return true;
  }

  std::string failure() { return failure_.message(); }

  // Best effort after a failure: unlinks every file this trial may have made,
  // then whatever else readdir still lists, then the subdirectory. Says on
  // stderr what it could not remove.
  void Cleanup() {
    if (!made_subdir_) return;
    uint64_t removed = 0;
    int first_err = 0;
    std::string first_path;
    auto remove = [&](const std::string& path) {
      if (unlink(path.c_str()) == 0) {
        ++removed;
      } else if (errno != ENOENT && first_err == 0) {
        first_err = errno;
        first_path = path;
      }
    };
    for (const auto& path : paths_) remove(path);
    if (DIR* dir = opendir(subdir_.c_str())) {
      std::vector<std::string> strays;
      while (dirent* e = readdir(dir)) {
        if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) strays.push_back(e->d_name);
      }
      closedir(dir);
      for (const auto& name : strays) remove(subdir_ + "/" + name);
    }
    if (rmdir(subdir_.c_str()) == 0) {
      fmt::print(stderr, "metadata_bench: cleaned up {} ({} files removed)\n", subdir_, removed);
    } else {
      const int err = errno;
      fmt::print(stderr, "metadata_bench: cleanup left {} behind: rmdir: {}", subdir_, ErrnoText(err));
      if (first_err != 0) fmt::print(stderr, "; first failed unlink {}: {}", first_path, ErrnoText(first_err));
      fmt::print(stderr, "\n");
    }
    made_subdir_ = false;
  }

 private:
  void Create(uint64_t lo, uint64_t hi) {
    for (uint64_t i = lo; i < hi; ++i) {
      if (g_stop.load(std::memory_order_relaxed)) return;
      const std::string& path = paths_[i];
      const int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
      if (fd < 0) return failure_.syscall("open(O_CREAT|O_EXCL)", path, errno);
      if (close(fd) != 0) return failure_.syscall("close", path, errno);
    }
  }

  void Stat(uint64_t lo, uint64_t hi) {
    struct stat st;
    for (uint64_t k = lo; k < hi; ++k) {
      if (g_stop.load(std::memory_order_relaxed)) return;
      const std::string& path = paths_[order_[k]];
      if (stat(path.c_str(), &st) != 0) return failure_.syscall("stat", path, errno);
      if (!S_ISREG(st.st_mode) || st.st_size != 0) {
        return failure_.set(fmt::format("stat {}: mode 0{:o}, size {}; expected an empty regular file", path,
                                        static_cast<unsigned>(st.st_mode), static_cast<int64_t>(st.st_size)));
      }
    }
  }

  void Unlink(uint64_t lo, uint64_t hi) {
    for (uint64_t i = lo; i < hi; ++i) {
      if (g_stop.load(std::memory_order_relaxed)) return;
      if (unlink(paths_[i].c_str()) != 0) return failure_.syscall("unlink", paths_[i], errno);
    }
  }

  // The timed readdir: only counts, as `ls -f | wc -l` would.
  bool CountEntries(uint64_t* entries, uint64_t* dots) {
    DIR* dir = opendir(subdir_.c_str());
    if (dir == nullptr) {
      failure_.syscall("opendir", subdir_, errno);
      return false;
    }
    errno = 0;
    while (dirent* e = readdir(dir)) {
      ++*entries;
      if (e->d_name[0] == '.' && (e->d_name[1] == '\0' || (e->d_name[1] == '.' && e->d_name[2] == '\0'))) ++*dots;
    }
    const int err = errno;
    closedir(dir);
    if (err != 0) {
      failure_.syscall("readdir", subdir_, err);
      return false;
    }
    return true;
  }

  // Untimed: every file name exactly once, nothing else but the dot entries.
  bool CheckNames() {
    DIR* dir = opendir(subdir_.c_str());
    if (dir == nullptr) {
      failure_.syscall("opendir", subdir_, errno);
      return false;
    }
    std::vector<uint8_t> seen(files_, 0);
    std::vector<std::string> problems;
    uint64_t problem_count = 0;
    auto problem = [&](std::string what) {
      if (problems.size() < 5) problems.push_back(std::move(what));
      ++problem_count;
    };
    errno = 0;
    while (dirent* e = readdir(dir)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      uint64_t i = 0;
      const bool digits = name.size() > 1 && name[0] == 'f' &&
                          std::all_of(name.begin() + 1, name.end(), [](char c) { return c >= '0' && c <= '9'; });
      if (digits && name.size() < 20) i = std::stoull(name.substr(1));
      if (!digits || name.size() >= 20 || i >= files_ || FileName(i) != name) {
        problem(fmt::format("unexpected entry \"{}\"", name));
      } else if (seen[i]++ != 0) {
        problem(fmt::format("\"{}\" listed twice", name));
      }
    }
    const int err = errno;
    closedir(dir);
    if (err != 0) {
      failure_.syscall("readdir", subdir_, err);
      return false;
    }
    for (uint64_t i = 0; i < files_; ++i) {
      if (seen[i] == 0) problem(fmt::format("\"{}\" missing", FileName(i)));
    }
    if (problem_count == 0) return true;
    std::string list;
    for (const auto& p : problems) list += (list.empty() ? "" : ", ") + p;
    failure_.set(fmt::format("readdir {}: {} wrong names: {}{}", subdir_, problem_count, list,
                             problem_count > problems.size() ? ", ..." : ""));
    return false;
  }

  const std::string subdir_;
  const uint64_t files_;
  const int threads_;
  const std::vector<uint32_t>& order_;
  std::vector<std::string> paths_;
  bool made_subdir_ = false;
  Failure failure_;
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string Grouped(double value) {
  std::string digits = fmt::format("{:.0f}", value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// About three significant digits without an exponent: 1.29, 0.224, 0.0462, 0.000414.
std::string Ratio(double r) {
  if (!(r > 0)) return "0";
  const int decimals = std::max(2, 2 - static_cast<int>(std::floor(std::log10(r))));
  return fmt::format("{:.{}f}", r, decimals);
}

}  // namespace
}  // namespace stripefs::bench

int main(int argc, char** argv) {
  using namespace stripefs::bench;
  CLI::App app{
      "Create, stat, readdir and unlink N empty files in a fresh subdirectory of each DIR, interleaved over runs;\n"
      "prints the median rate per phase and DIR and each DIR's ratio to the first."};
  uint64_t files = 100'000;
  int runs = 3, threads = 1;
  uint64_t seed = 1;
  std::string json_path;
  std::vector<std::string> dir_args;
  app.add_option("--files", files, "Files per run and target")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{UINT32_MAX}));
  app.add_option("--runs", runs, "Runs; each measures every DIR once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--threads", threads, "Threads for create, stat and unlink (the files split among them)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--seed", seed, "Seed of the stat order")->capture_default_str();
  app.add_option("--json", json_path, "Write every run's figures and the medians to FILE");
  app.add_option("dirs", dir_args, "Target directories, each PATH or LABEL=PATH (the first is the ratios' base)")
      ->required();
  CLI11_PARSE(app, argc, argv);
  if (static_cast<uint64_t>(threads) > files) {
    fmt::print(stderr, "metadata_bench: --threads {} is more than --files {}\n", threads, files);
    return 2;
  }

  std::vector<Target> targets;
  for (const auto& arg : dir_args) {
    Target t = ParseTarget(arg);
    struct stat st;
    if (stat(t.path.c_str(), &st) != 0) {
      fmt::print(stderr, "metadata_bench: stat {}: {}\n", t.path, ErrnoText(errno));
      return 2;
    }
    if (!S_ISDIR(st.st_mode)) {
      fmt::print(stderr, "metadata_bench: {} is not a directory\n", t.path);
      return 2;
    }
    for (const auto& other : targets) {
      if (other.label == t.label) {
        fmt::print(stderr, "metadata_bench: label \"{}\" given twice\n", t.label);
        return 2;
      }
    }
    t.fstype = FsType(t.path);
    targets.push_back(std::move(t));
  }

  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  std::vector<uint32_t> order(files);
  for (uint64_t i = 0; i < files; ++i) order[i] = static_cast<uint32_t>(i);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);

  fmt::print("metadata_bench: {} files, {} run{}, {} thread{}, stat order seed {}\n", files, runs, runs == 1 ? "" : "s",
             threads, threads == 1 ? "" : "s", seed);
  for (const auto& t : targets) fmt::print("  {:<12} {} ({})\n", t.label, t.path, t.fstype);
  std::fflush(stdout);

  const size_t n_targets = targets.size();
  std::vector<std::vector<Sample>> samples(n_targets);  // [target][run]
  for (int run = 1; run <= runs; ++run) {
    for (size_t pos = 0; pos < n_targets; ++pos) {
      const size_t ti = (pos + run - 1) % n_targets;
      const Target& target = targets[ti];
      const std::string subdir = fmt::format("{}/metadata_bench.{}.r{}.t{}", target.path, getpid(), run, ti);
      Trial trial(subdir, files, threads, order);
      Sample sample;
      sample.run = run;
      sample.position = static_cast<int>(pos);
      if (!trial.Run(&sample)) {
        const std::string why = trial.failure();
        fmt::print(stderr, "metadata_bench: run {} target {}: {}\n", run, target.label, why);
        trial.Cleanup();
        return g_interrupted ? 130 : 1;
      }
      fmt::print(stderr, "run {}/{} {:<12} create {:>10}/s  stat {:>10}/s  readdir {:>10}/s  unlink {:>10}/s\n", run,
                 runs, target.label, Grouped(files / sample.seconds[kCreate]), Grouped(files / sample.seconds[kStat]),
                 Grouped(files / sample.seconds[kReaddir]), Grouped(files / sample.seconds[kUnlink]));
      samples[ti].push_back(sample);
    }
  }

  // medians[target][phase], in ops/s (readdir: file entries/s).
  std::vector<std::array<double, kPhases>> medians(n_targets);
  for (size_t ti = 0; ti < n_targets; ++ti) {
    for (int p = 0; p < kPhases; ++p) {
      std::vector<double> rates;
      for (const auto& s : samples[ti]) rates.push_back(files / s.seconds[p]);
      medians[ti][p] = Median(rates);
    }
  }

  // The table: phase, one column per target, then target/first for the others.
  std::vector<std::string> header{"phase"};
  for (const auto& t : targets) header.push_back(t.label);
  for (size_t ti = 1; ti < n_targets; ++ti) header.push_back(targets[ti].label + "/" + targets[0].label);
  std::vector<std::vector<std::string>> rows;
  for (int p = 0; p < kPhases; ++p) {
    std::vector<std::string> row{kPhaseNames[p]};
    for (size_t ti = 0; ti < n_targets; ++ti) row.push_back(Grouped(medians[ti][p]));
    for (size_t ti = 1; ti < n_targets; ++ti) row.push_back(Ratio(medians[ti][p] / medians[0][p]));
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  fmt::print("\nops/s, median of {} run{} ({} files, {} thread{}; readdir: file entries/s)\n", runs,
             runs == 1 ? "" : "s", files, threads, threads == 1 ? "" : "s");
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line = fmt::format("{:<{}}", row[0], width[0]);
    for (size_t c = 1; c < row.size(); ++c) line += fmt::format("  {:>{}}", row[c], width[c]);
    fmt::print("{}\n", line);
  };
  print_row(header);
  for (const auto& row : rows) print_row(row);

  if (!json_path.empty()) {
    nlohmann::json out;
    out["files"] = files;
    out["runs"] = runs;
    out["threads"] = threads;
    out["seed"] = seed;
    out["units"] = "ops/s; readdir: file entries/s (dot entries not counted)";
    out["targets"] = nlohmann::json::array();
    for (size_t ti = 0; ti < n_targets; ++ti) {
      const Target& t = targets[ti];
      nlohmann::json jt{{"label", t.label}, {"path", t.path}, {"fstype", t.fstype}};
      for (const auto& s : samples[ti]) {
        nlohmann::json js{{"run", s.run},
                          {"position", s.position},
                          {"rmdir_seconds", s.rmdir_seconds},
                          {"readdir_entries", s.readdir_entries},
                          {"dot_entries", s.dot_entries}};
        for (int p = 0; p < kPhases; ++p) {
          js[kPhaseNames[p]] = {{"seconds", s.seconds[p]}, {"ops_per_s", files / s.seconds[p]}};
        }
        jt["samples"].push_back(js);
      }
      for (int p = 0; p < kPhases; ++p) {
        jt["median_ops_per_s"][kPhaseNames[p]] = medians[ti][p];
        jt["ratio_to_first"][kPhaseNames[p]] = medians[ti][p] / medians[0][p];
      }
      out["targets"].push_back(jt);
    }
    std::ofstream f(json_path);
    f << out.dump(2) << "\n";
    f.close();
    if (!f) {
      fmt::print(stderr, "metadata_bench: writing {} failed\n", json_path);
      return 1;
    }
  }
  return 0;
}
