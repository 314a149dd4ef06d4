// SPDX-License-Identifier: Apache-2.0
// A real 3-member etcd cluster on 127.0.0.1 for the tests of the etcd store.
// Under ctest it is the one the etcd fixture started (STRIPEFS_TEST_ETCD_DIR);
// otherwise tests/support/etcd_cluster.sh starts one on first use in the
// test process, stopped by its members' pids when the process exits. Each
// test takes a prefix of its own, so tests never see each other's keys.
// A test that kills a member restarts it before it ends.
#pragma once

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "meta/etcd_kv_store.h"

namespace stripefs::testing_etcd {

class TestEtcdCluster {
 public:
  static TestEtcdCluster& Get() {
    static TestEtcdCluster cluster;
    return cluster;
  }
  const std::string& endpoints() const { return endpoints_; }
  std::string dir() const { return dir_; }
  // Runs etcd_cluster.sh with args on this cluster; true when it succeeded.
  bool Run(const std::string& args) const {
    return std::system((Script() + " " + args + " " + dir_ + " >/dev/null").c_str()) == 0;
  }
  bool Kill(int member) const { return Run("kill", member); }
  bool Restart(int member) const { return Run("restart", member); }

  // An etcd:// target under a prefix no other test uses.
  meta::EtcdTarget FreshTarget() {
    static std::atomic<int> n{0};
    auto t = meta::ParseEtcdUri("etcd://" + endpoints_ + "/test-" + std::to_string(getpid()) + "-" +
                                std::to_string(n++));
    if (!t.ok()) throw std::runtime_error(t.status().message());
    return t.value();
  }

 private:
  static std::string Script() { return std::string("bash ") + STRIPEFS_SOURCE_DIR + "/tests/support/etcd_cluster.sh"; }
  bool Run(const char* cmd, int member) const {
    return std::system((Script() + " " + cmd + " " + dir_ + " " + std::to_string(member) + " >/dev/null").c_str()) == 0;
  }

  TestEtcdCluster() {
    if (const char* shared = std::getenv("STRIPEFS_TEST_ETCD_DIR")) {
      dir_ = shared;
      std::ifstream(dir_ + "/endpoints") >> endpoints_;
      if (endpoints_.empty()) throw std::runtime_error("no test etcd cluster in " + dir_ + " (etcd_cluster.start failed?)");
      return;
    }
    owned_ = true;
    char tmpl[] = "/tmp/stripefs-etcd-test.XXXXXX";
    if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    if (std::system((Script() + " start " + dir_).c_str()) != 0) {
      throw std::runtime_error("could not start a test etcd cluster in " + dir_);
    }
    std::ifstream(dir_ + "/endpoints") >> endpoints_;
  }
  ~TestEtcdCluster() {
    if (!owned_) return;
    std::system((Script() + " stop " + dir_).c_str());
    std::system(("rm -rf " + dir_).c_str());
  }

  std::string dir_;
  std::string endpoints_;
  bool owned_ = false;  // started here, so stopped here
};

}  // namespace stripefs::testing_etcd
