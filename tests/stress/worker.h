// SPDX-License-Identifier: Apache-2.0
// One thread of stripefs-stress: the files and directories it owns, an exact
// model of their contents and xattrs, and the random operations it runs on
// them, each result checked against the model (see stress.cc).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "pattern.h"
#include "run.h"

namespace stress {

struct Obj {
  uint32_t id = 0;
  std::vector<uint8_t> data;
  std::map<std::string, std::string> xattrs;
  int nlink = 0;
};

class Worker {
 public:
  // An overwriter works on few files and mostly overwrites their data in
  // place, so that a kill often lands inside an overwrite.
  Worker(uint32_t t, int root_fd, bool overwriter)
      : t_(t), root_fd_(root_fd), overwriter_(overwriter), nslots_(overwriter ? std::min(4, g_files) : g_files),
        rng_(Mix(g_seed ^ Mix(t + 1))) {
    slots_.resize(g_files);
    dirs_.resize(kDirSlots);
  }
  ~Worker() {
    if (dir_fd_ >= 0) ::close(dir_fd_);
  }

  // Makes DIR/t<k> (and sub) or takes over what an earlier run left there.
  void setup(ThreadState* persisted);
  // Run after setup: recovered state must survive further writes. Rewrites
  // one byte of every MiB of each adopted file with the value it has, then
  // re-reads the whole file past the page cache. Returns the files probed.
  int probe_adopted();
  void run(uint64_t max_ops, Clock::time_point deadline);
  const Stats& stats() const { return stats_; }

 private:
  // --- helpers
  uint64_t rnd(uint64_t n) { return n ? rng_() % n : 0; }  // [0, n)
  bool chance(unsigned pct) { return rnd(100) < pct; }
  int pick_file_slot(bool want_present, bool hot = false);
  std::vector<int> slots_of(const std::shared_ptr<Obj>& o) const;

  void note(const std::string& what);
  [[noreturn]] void diverge(const std::string& what);
  // An error no model predicts: the end of the run if the mount is gone,
  // otherwise a divergence.
  [[noreturn]] void unexpected(const std::string& call, int err);
  bool mount_gone();
  // The errno of a failed call (0 on success); throws Disconnected.
  int err_of(long rc);
  void expect_ok(long rc, const std::string& call) {
    int e = err_of(rc);
    if (e) unexpected(call, e);
  }
  void expect_err(long rc, int want, const std::string& call);
  int open_slot(int slot, int flags, mode_t mode = 0);
  int open_parent(int slot);
  void close_fd(int fd, const std::string& call);
  void pwrite_all(int fd, const uint8_t* p, size_t len, uint64_t off, const std::string& call);
  std::vector<uint8_t> read_all(int fd, uint64_t size, const std::string& call);
  std::map<std::string, std::string> read_xattrs(int fd, const std::string& name);

  uint32_t new_obj_id();
  // Drops clean records of these slots before an operation may change them.
  void touch(const std::vector<int>& slots);
  void record_clean(int slot, bool with_xattrs);
  void compare(const std::string& name, uint64_t off, const uint8_t* want, const uint8_t* got, size_t len);

  // --- operations
  void op_create();
  void op_write(bool append);
  void op_truncate();
  void op_rename();
  void op_link();
  void op_unlink();
  void op_dir();
  void op_fsync();
  void op_setxattr();
  void op_removexattr();
  void op_getxattr();
  void op_read();
  void op_stat();
  void op_readdir();

  uint32_t t_;
  int root_fd_;
  bool overwriter_;
  int nslots_;  // names it picks from: the first nslots_
  int dir_fd_ = -1;
  std::mt19937_64 rng_;
  std::vector<std::shared_ptr<Obj>> slots_;
  std::vector<bool> dirs_;
  uint32_t next_obj_ = 1;
  uint32_t opno_ = 0;
  std::deque<std::string> recent_;
  Stats stats_;
  uint64_t clean_slots_ = 0;  // bitmask mirror of g_state's clean records of this thread
};

}  // namespace stress
