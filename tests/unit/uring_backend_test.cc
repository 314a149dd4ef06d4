// SPDX-License-Identifier: Apache-2.0
// The io_uring backend on real files: a batch of small and large requests to
// drive files in memory (tmpfs, where small requests run on the calling
// thread) and on the disk (where they go through the ring) moves every byte
// to and from the right place.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "engine/store/aligned_buffer.h"
#include "engine/io/io_backend.h"

namespace stripefs {
namespace {

constexpr uint64_t kDriveSize = 64ull << 20;

class UringBackendTest : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(GetParam()) / ("stripefs-uring-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    for (int i = 0; i < 2; ++i) {
      const std::string path = (dir_ / ("d" + std::to_string(i))).string();
      int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
      ASSERT_GE(fd, 0) << path;
      ASSERT_EQ(ftruncate(fd, kDriveSize), 0);
      fds_.push_back(fd);
    }
    backend_ = NewUringBackend(fds_);
  }
  void TearDown() override {
    backend_.reset();
    for (int fd : fds_) close(fd);
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  std::vector<int> fds_;
  std::unique_ptr<IoBackend> backend_;
};

// Byte i of request r: distinct for every request and offset.
char Pattern(size_t r, size_t i) { return static_cast<char>((r * 131 + i * 7 + i / 4096) & 0xff); }

TEST_P(UringBackendTest, ABatchOfSmallAndLargeRequestsWritesAndReadsEveryByte) {
  // 300 writes of 4 KiB and 3 of 1 MiB, interleaved, over two drives: more
  // than a ring holds at once, and both kinds of request in one batch.
  struct Spec {
    uint32_t segment;
    uint64_t offset;
    size_t len;
  };
  std::vector<Spec> specs;
  for (size_t i = 0; i < 300; ++i) {
    specs.push_back({static_cast<uint32_t>(i % 2), (i / 2) * 8192, 4096});
    if (i % 100 == 50) specs.push_back({static_cast<uint32_t>(i % 2), (32ull << 20) + i * (1 << 20), 1 << 20});
  }
  std::vector<AlignedBuffer> data(specs.size()), back(specs.size());
  std::vector<IoRequest> writes, reads;
  for (size_t r = 0; r < specs.size(); ++r) {
    data[r].resize_uninitialized(specs[r].len);
    for (size_t i = 0; i < specs[r].len; ++i) data[r].data()[i] = Pattern(r, i);
    back[r].resize_uninitialized(specs[r].len);
    writes.push_back({IoRequest::Op::kWrite, specs[r].segment, specs[r].offset, data[r].data(), specs[r].len});
    reads.push_back({IoRequest::Op::kRead, specs[r].segment, specs[r].offset, back[r].data(), specs[r].len});
  }
  Status s = backend_->run(writes);
  ASSERT_TRUE(s.ok()) << s.message();
  s = backend_->run(reads);
  ASSERT_TRUE(s.ok()) << s.message();
  for (size_t r = 0; r < specs.size(); ++r) {
    ASSERT_EQ(std::memcmp(back[r].data(), data[r].data(), specs[r].len), 0) << "request " << r;
  }
  // And where the bytes landed: read the drive file itself.
  std::string on_drive(4096, '\0');
  ASSERT_EQ(pread(fds_[1], on_drive.data(), 4096, specs[3].offset), 4096);
  EXPECT_EQ(std::memcmp(on_drive.data(), data[3].data(), 4096), 0);
}

TEST_P(UringBackendTest, ARequestToAMissingDriveFailsAndTheOthersAreDone) {
  AlignedBuffer a, b;
  a.resize_uninitialized(4096);
  b.resize_uninitialized(4096);
  std::memset(a.data(), 'a', 4096);
  std::memset(b.data(), 'b', 4096);
  std::vector<IoRequest> writes = {{IoRequest::Op::kWrite, 0, 0, a.data(), 4096},
                                   {IoRequest::Op::kWrite, 7, 0, b.data(), 4096},
                                   {IoRequest::Op::kWrite, 1, 4096, b.data(), 4096}};
  Status s = backend_->run(writes);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("segment 7"), std::string::npos) << s.message();
  std::string got(4096, '\0');
  ASSERT_EQ(pread(fds_[1], got.data(), 4096, 4096), 4096);
  EXPECT_EQ(got, std::string(4096, 'b'));
}

INSTANTIATE_TEST_SUITE_P(InMemoryAndOnDisk, UringBackendTest, ::testing::Values("/dev/shm", "/var/tmp"),
                         [](const auto& info) { return info.index == 0 ? std::string("tmpfs") : std::string("disk"); });

}  // namespace
}  // namespace stripefs
