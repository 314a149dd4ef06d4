// SPDX-License-Identifier: Apache-2.0
// The mount daemon (see daemon.h).
#include "tools/daemon.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/syslog_sink.h>
#include <spdlog/spdlog.h>
#include <mntent.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "api/beside_mount.h"
#include "api/object_channel.h"
#include "engine/pool/pool.h"
#include "meta/etcd_kv_store.h"
#include "tools/commands.h"

namespace stripefs {
namespace {

// Where the outcome of a mount goes. A daemon sends "OK" once the mount
// answers, or the reason it could not mount, through a pipe to the command
// that forked it and waits for it. Failures with no one waiting on the pipe
// (before the fork, in that command, in the foreground, or after the answer
// was sent) are printed on stderr.
class Outcome {
 public:
  // The daemon's end of the pipe; the next Ready() or Fail() is sent through it.
  void SendThrough(int pipe_fd) { pipe_fd_ = pipe_fd; }
  void Ready() { Send("OK"); }
  // Returns 1, the exit status of a failed mount.
  int Fail(const std::string& msg) {
    Send(msg);
    return 1;
  }

 private:
  void Send(const std::string& msg) {
    if (pipe_fd_ >= 0) {
      (void)!write(pipe_fd_, msg.data(), msg.size());
      close(pipe_fd_);
      pipe_fd_ = -1;
    } else if (msg != "OK") {
      std::cerr << "stripefs: " << msg << "\n";
    }
  }

  int pipe_fd_ = -1;
};

Status CheckMountpoint(const std::string& mountpoint, bool nonempty) {
  if (auto dead = DeadMountProblem(mountpoint)) return Status::Invalid(*dead);
  struct stat st;
  if (stat(mountpoint.c_str(), &st) != 0) {
    return Status::Invalid(fmt::format("mountpoint {}: {}", mountpoint, strerror(errno)));
  }
  if (!S_ISDIR(st.st_mode)) return Status::Invalid(fmt::format("mountpoint {} is not a directory", mountpoint));
  // A mount hides what the directory holds; like fuse2 and most mount
  // tools, refuse unless asked for.
  std::error_code ec;
  if (!nonempty && !std::filesystem::is_empty(mountpoint, ec) && !ec) {
    return Status::Invalid(fmt::format("mountpoint {} is not empty: the mount would hide its files; "
                                       "empty it, use another directory, or mount with -o nonempty", mountpoint));
  }
  return Status::OK();
}

// path made absolute, its symbolic links and dots resolved where it exists.
std::string CanonicalPath(const std::string& path) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) return path;
  std::filesystem::path canonical = std::filesystem::weakly_canonical(abs, ec);
  return (ec ? abs : canonical).string();
}


Status MakeStateDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("cannot create the daemon's state directory {}: {}", dir, ec.message()));
  return Status::OK();
}

// True while process pid has /dev/fuse open, i.e. still serves a mount.
bool ServesAMount(pid_t pid) {
  std::error_code ec;
  for (const auto& fd : std::filesystem::directory_iterator(fmt::format("/proc/{}/fd", pid), ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(fd.path(), link_ec) == "/dev/fuse") return true;
  }
  return false;
}

// Right after `umount` the pool's daemon is still flushing and closing the
// pool (it holds the metadata lock until it exits): a mount then waits for it
// instead of failing with "in use". A daemon that still serves a mount is not
// waited for; Pool::Open reports the pool as in use.
void WaitForUnmountedDaemon(const std::string& pid_file) {
  FILE* f = fopen(pid_file.c_str(), "r");
  if (!f) return;
  int pid = 0;
  const bool read_pid = fscanf(f, "%d", &pid) == 1;
  fclose(f);
  if (!read_pid || pid <= 0) return;
  for (int i = 0; i < 600 && kill(pid, 0) == 0 && !ServesAMount(pid); ++i) usleep(50 * 1000);
}

// The forking command's side: waits for the daemon's answer on ready_fd, then
// for the mount to answer.
Status WaitForDaemon(pid_t daemon, int ready_fd, const std::string& mountpoint) {
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = read(ready_fd, buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(ready_fd);
  if (msg != "OK") {
    int status = 0;
    waitpid(daemon, &status, 0);
    return Status::IOError(msg.empty() ? "the mount daemon exited before the mount was ready" : msg);
  }
  struct statfs st;
  if (statfs(mountpoint.c_str(), &st) != 0) return Status::IOError("the mount does not answer");
  return Status::OK();
}

// A daemon logs to its file and to syslog (the journal, where systemd runs);
// with -f spdlog's default logger prints on the terminal.
void LogToFileAndSyslog(const std::string& log_file) {
  std::vector<spdlog::sink_ptr> sinks{std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file),
                                      std::make_shared<spdlog::sinks::syslog_sink_mt>("stripefs", LOG_PID, LOG_DAEMON, true)};
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("stripefs", sinks.begin(), sinks.end()));
  spdlog::flush_every(std::chrono::seconds(2));
  spdlog::flush_on(spdlog::level::warn);  // what went wrong is in the file at once
}

// The options that tune the opened pool rather than the FUSE session.
void ApplyToPool(const fs::MountOptions& options, Pool& pool) {
  if (options.meta_reserve) pool.set_metadata_reserve(*options.meta_reserve);
  if (options.ram_cache != "off" && pool.ram_capacity() > 0) pool.store().set_cache(pool.ram_capacity(), options.ram_cache);
}

// Once the kernel mount exists: the pid file that WaitForUnmountedDaemon reads,
// and a daemon lets go of the terminal and of the directory it started in.
void OnMounted(const fs::MountOptions& options, const std::string& pid_file) {
  if (FILE* f = fopen(pid_file.c_str(), "w")) {
    fprintf(f, "%d\n", getpid());
    fclose(f);
  }
  if (!options.foreground) {
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, 0);
      dup2(null, 1);
      dup2(null, 2);
      close(null);
    }
    (void)!chdir("/");
  }
}

// The object API for other processes while mounted (api/object_channel.h),
// in the state directory; not for a read-only mount, which changes nothing.
// A mount without it still serves: a failure is logged.
std::shared_ptr<void> StartObjectChannel(const fs::MountOptions& options, Pool* pool,
                                         const fs::MountNotices& notices) {
  if (options.reader || options.read_only.value_or(false)) return nullptr;
  auto api = api::OpenBesideMount(pool, {notices.data_changed, notices.entry_changed, notices.unlinked});
  auto started = api::ChannelServer::Start(options.state_dir + "/" + api::kChannelSocketName, std::move(api));
  if (!started.ok()) {
    spdlog::error("{} (the object API cannot reach this mount)", started.status().message());
    return nullptr;
  }
  return std::shared_ptr<api::ChannelServer>(std::move(started).value());
}

// The daemon (or the -f process): opens the pool, serves the mount until it
// is unmounted, then closes the pool.
int OpenAndServe(const fs::MountOptions& options, const std::string& pid_file, Outcome& outcome) {
  auto pool = Pool::Open(options.meta_dir, options.reader ? Pool::Mode::kInspect : Pool::Mode::kMount, options.degraded);
  if (!pool.ok()) return outcome.Fail(pool.status().message());
  if (!options.foreground) {  // only now: a refused mount leaves no log file in a directory that is not a pool
    LogToFileAndSyslog(options.log_file.empty() ? options.state_dir + "/stripefs.log" : options.log_file);
  }
  spdlog::set_level(options.log_level);
  if (!options.reader) ApplyToPool(options, *pool.value());  // a reader changes nothing, and caches no chunk
  for (const auto& m : pool.value()->missing_drives()) {
    std::cerr << "stripefs: warning: mounting degraded: " << m << "\n";
    spdlog::warn("mounted degraded: {}", m);
  }
  spdlog::info("pool {} mounted at {}", pool.value()->config().uuid, options.mountpoint);
  Status s = fs::Serve(pool.value().get(), options, [&](const fs::MountNotices& notices) {
    std::shared_ptr<void> channel = StartObjectChannel(options, pool.value().get(), notices);
    OnMounted(options, pid_file);
    outcome.Ready();
    return channel;
  });
  pool.value().reset();  // synced and closed: the pool is free for the next mount
  unlink(pid_file.c_str());
  if (!s.ok()) {
    spdlog::error("{}", s.message());
    return outcome.Fail(s.message());
  }
  spdlog::info("unmounted cleanly");
  return 0;
}

// -o remount (mount -o remount,ro MOUNTPOINT runs the helper, which runs
// this): the running mount changes, and no second daemon starts. ro/rw and
// the per-mount flags nosuid, nodev and noexec change as given; the others
// stay as mounted (MS_REMOUNT clears what it is not given). The kernel then
// refuses writes with EROFS itself; the daemon keeps serving reads.
int Remount(const fs::MountOptions& options) {
  std::error_code ec;
  const std::string mountpoint = std::filesystem::weakly_canonical(options.mountpoint, ec).string();
  auto fail = [&](const std::string& why) {
    std::cerr << "stripefs: cannot remount " << mountpoint << ": " << why << "\n";
    return 1;
  };
  bool ours = false;
  if (FILE* mounts = setmntent("/proc/self/mounts", "r")) {
    while (mntent* m = getmntent(mounts)) {
      if (mountpoint == m->mnt_dir) ours = std::string(m->mnt_type) == "fuse.stripefs";  // the last mount there counts
    }
    endmntent(mounts);
  }
  if (!ours) return fail("it is not a stripefs mount (mount the pool first; -o remount changes a running mount)");
  struct statvfs now;
  if (statvfs(mountpoint.c_str(), &now) != 0) return fail(strerror(errno));
  unsigned long flags = MS_REMOUNT;
  const std::pair<unsigned long, unsigned long> kept[] = {
      {ST_RDONLY, MS_RDONLY},     {ST_NOSUID, MS_NOSUID},         {ST_NODEV, MS_NODEV},
      {ST_NOEXEC, MS_NOEXEC},     {ST_SYNCHRONOUS, MS_SYNCHRONOUS}, {ST_NOATIME, MS_NOATIME},
      {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME}};
  for (const auto& [st, ms] : kept) {
    if (now.f_flag & st) flags |= ms;
  }
  if (options.read_only) flags = *options.read_only ? flags | MS_RDONLY : flags & ~MS_RDONLY;
  for (const std::string& o : options.fuse_options) {
    for (const auto& [name, flag] : {std::pair{"suid", MS_NOSUID}, {"dev", MS_NODEV}, {"exec", MS_NOEXEC}}) {
      if (o == name) flags &= ~flag;
      if (o == std::string("no") + name) flags |= flag;
    }
  }
  if (mount(nullptr, mountpoint.c_str(), nullptr, flags, nullptr) != 0) return fail(strerror(errno));
  return 0;
}

}  // namespace

int RunMount(fs::MountOptions options) {
  if (options.remount) return Remount(options);
  Outcome outcome;
  if (Status s = CheckMountpoint(options.mountpoint, options.nonempty); !s.ok()) return outcome.Fail(s.message());
  // Canonical paths, as mount(8) writes an fstab line's: the mount's source
  // (the metadata directory) must match it.
  if (!meta::IsEtcdUri(options.meta_dir)) options.meta_dir = CanonicalPath(options.meta_dir);
  options.mountpoint = CanonicalPath(options.mountpoint);
  // -o ro on an etcd pool: a reader beside the pool's writer (which may run
  // on this machine or another). It takes no writer lock, and keeps its pid
  // file and log apart from the writer's.
  options.reader = options.read_only.value_or(false) && meta::IsEtcdUri(options.meta_dir);
  if (options.state_dir.empty()) {
    options.state_dir = meta::DefaultStateDir(options.meta_dir);
    if (options.reader) options.state_dir += "/reader" + meta::SafeFileName(options.mountpoint);
  }
  // A pool's own directory is never made here: Pool::Open refuses a missing one.
  if (options.state_dir != options.meta_dir) {
    if (Status s = MakeStateDir(options.state_dir); !s.ok()) return outcome.Fail(s.message());
  }
  const std::string pid_file = options.state_dir + "/daemon.pid";
  WaitForUnmountedDaemon(pid_file);

  if (!options.foreground) {
    // The daemon reports "OK" or its error through this pipe, so this command
    // can return once the mount answers, or fail with the real reason.
    int ready[2] = {-1, -1};
    if (pipe2(ready, O_CLOEXEC) != 0) return outcome.Fail("cannot create a pipe");
    pid_t child = fork();
    if (child < 0) return outcome.Fail("cannot fork");
    if (child > 0) {
      close(ready[1]);
      Status s = WaitForDaemon(child, ready[0], options.mountpoint);
      return s.ok() ? 0 : outcome.Fail(s.message());
    }
    close(ready[0]);
    setsid();
    outcome.SendThrough(ready[1]);
  }
  return OpenAndServe(options, pid_file, outcome);
}

}  // namespace stripefs
