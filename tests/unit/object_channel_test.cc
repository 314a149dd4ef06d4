// SPDX-License-Identifier: Apache-2.0
// The object channel (api/object_channel.h) over a real pool (drive files,
// RocksDB, io_uring): the daemon's server over the pool a mount would serve,
// and clients that reach it through ObjectPool::Open. No FUSE here: the
// notices the mount would get are recorded. tests/python covers a real mount.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "api/beside_mount.h"
#include "api/channel_io.h"
#include "api/object_channel.h"
#include "engine/pool/pool.h"
#include "stripefs/objects.h"
#include "tests/unit/test_pool.h"

namespace stripefs {
namespace {

using api::Error;
using api::ObjectPool;

class ObjectChannelTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing_support::FreshTestDir("channel");
    FormatOptions o = testing_support::TestPoolOptions(dir_, 3, 64ull << 20);
    o.ram_size = 16ull << 20;
    o.chunk_size = 1 << 20;
    ASSERT_TRUE(FormatPool(o, 0, 0).ok());
    auto pool = Pool::Open(meta(), Pool::Mode::kMount);
    ASSERT_TRUE(pool.ok()) << pool.status().message();
    pool_ = std::move(pool).value();
    api::MountHooks hooks{[this](uint64_t ino) { note("data " + std::to_string(ino)); },
                          [this](uint64_t parent, std::string_view name) {
                            note("entry " + std::to_string(parent) + "/" + std::string(name));
                          },
                          [this](const meta::InodeRecord& r) {
                            note("unlinked " + std::to_string(r.ino));
                            ASSERT_TRUE(pool_->store().reclaim(r.ino).ok());
                          }};
    auto server = api::ChannelServer::Start(socket(), api::OpenBesideMount(pool_.get(), hooks));
    ASSERT_TRUE(server.ok()) << server.status().message();
    server_ = std::move(server).value();
  }
  void TearDown() override {
    server_.reset();
    pool_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::string meta() const { return (dir_ / "meta").string(); }
  std::string socket() const { return meta() + "/" + api::kChannelSocketName; }
  void note(std::string n) {
    std::lock_guard lock(mu_);
    notices_.insert(std::move(n));
  }
  bool noted(const std::string& n) {
    std::lock_guard lock(mu_);
    return notices_.count(n) > 0;
  }
  std::unique_ptr<ObjectPool> Client() {
    Error err;
    auto client = ObjectPool::Open(meta(), {}, &err);
    EXPECT_TRUE(client) << err.message;
    return client;
  }

  std::filesystem::path dir_;
  std::unique_ptr<Pool> pool_;
  std::unique_ptr<api::ChannelServer> server_;
  std::mutex mu_;
  std::set<std::string> notices_;  // GUARDED_BY(mu_)
};

TEST_F(ObjectChannelTest, ServesThePoolAndTellsTheMountOfEachChange) {
  auto client = Client();
  ASSERT_TRUE(client);
  EXPECT_STREQ(client->path(), "daemon");
  std::string big(9 * (1 << 20) + 3, '\0');  // past the first 4 MiB region
  std::mt19937 rng(3);
  for (auto& c : big) c = static_cast<char>(rng());
  std::string uri;
  ASSERT_FALSE(client->put("d/big", big, &uri));
  EXPECT_TRUE(uri.starts_with("stripefs://")) << uri;
  auto d = pool_->ns().lookup(meta::kRootIno, "d");
  ASSERT_TRUE(d.ok());
  auto stored = pool_->ns().lookup(d->ino, "big");
  ASSERT_TRUE(stored.ok()) << "written through: the mount's namespace has it at once";
  EXPECT_EQ(stored->size, big.size());
  EXPECT_TRUE(noted("entry 1/d")) << "a directory made on the way";
  EXPECT_TRUE(noted("entry " + std::to_string(d->ino) + "/big"));
  EXPECT_TRUE(noted("data " + std::to_string(stored->ino)));

  std::string back;
  ASSERT_FALSE(client->get("d/big", &back));
  EXPECT_TRUE(back == big);
  ASSERT_FALSE(client->get(uri, &back));
  EXPECT_TRUE(back == big) << "by URI";
  std::string part;
  ASSERT_FALSE(client->read("d/big", 5 << 20, 100, &part));
  EXPECT_EQ(part, big.substr(5 << 20, 100));
  std::vector<char> into(100);
  size_t got = 0;
  uint64_t size = 0;
  ASSERT_FALSE(client->read_into("d/big", big.size() - 40, into, &got, &size));
  EXPECT_EQ(got, 40u);
  EXPECT_EQ(size, big.size());
  ASSERT_FALSE(client->append("d/log", "one,"));
  ASSERT_FALSE(client->append("d/log", "two"));
  ASSERT_FALSE(client->get("d/log", &back));
  EXPECT_EQ(back, "one,two");
  std::vector<std::string> names;
  ASSERT_FALSE(client->list("d", &names));
  EXPECT_EQ(names, (std::vector<std::string>{"big", "log"}));

  // What the mount changes, the channel sees: nothing is remembered of names.
  ASSERT_TRUE(pool_->ns().unlink(d->ino, "log").ok());
  EXPECT_EQ(client->get("d/log", &back).code, ENOENT);
  EXPECT_EQ(client->get("d", &back).code, EISDIR);
  EXPECT_EQ(client->put("d/big/under", "x").code, ENOTDIR);

  ASSERT_FALSE(client->remove("d/big"));
  EXPECT_TRUE(noted("unlinked " + std::to_string(stored->ino)));
  EXPECT_EQ(client->size("d/big", &size).code, ENOENT);
  ASSERT_FALSE(client->sync());
  EXPECT_GE(client->stats().puts, 1u);
}

TEST_F(ObjectChannelTest, ReadsIntoAnIoBufferTheDaemonFillsItself) {
  auto client = Client();
  ASSERT_TRUE(client);
  std::string data(3 << 20, '\0');
  std::mt19937 rng(9);
  for (auto& c : data) c = static_cast<char>(rng());
  ASSERT_FALSE(client->put("obj", data));
  Error err;
  auto buffer = client->alloc_buffer(4 << 20, &err);
  ASSERT_TRUE(buffer) << err.message;
  const std::span<char> all = buffer->span();
  ASSERT_EQ(all.size(), 4u << 20);
  size_t got = 0;
  uint64_t size = 0;
  ASSERT_FALSE(client->read_into("obj", 0, all, &got, &size));
  EXPECT_EQ(got, data.size());
  EXPECT_EQ(size, data.size());
  EXPECT_TRUE(std::string_view(all.data(), got) == data);
  // A part of it, at an offset: the daemon writes only there.
  std::fill(all.begin(), all.end(), 'x');
  ASSERT_FALSE(client->read_into("obj", 1000, all.subspan(4096, 5000), &got));
  EXPECT_EQ(got, 5000u);
  EXPECT_EQ(std::string_view(all.data() + 4096, 5000), std::string_view(data).substr(1000, 5000));
  EXPECT_EQ(all[4095], 'x');
  EXPECT_EQ(all[4096 + 5000], 'x');
  // A span reaching past the buffer's end is read the plain way, through the payload.
  std::vector<char> plain(100);
  ASSERT_FALSE(client->read_into("obj", 7, plain, &got));
  EXPECT_EQ(std::string_view(plain.data(), 100), std::string_view(data).substr(7, 100));
  // A second buffer; the first goes, the second still works; one outlives its pool.
  auto second = client->alloc_buffer(1 << 20, &err);
  ASSERT_TRUE(second) << err.message;
  buffer.reset();
  ASSERT_FALSE(client->read_into("obj", 0, second->span(), &got));
  EXPECT_EQ(std::string_view(second->span().data(), got), std::string_view(data).substr(0, 1 << 20));
  client.reset();
  EXPECT_EQ(second->span()[5], data[5]) << "its memory stays the caller's";
}

TEST_F(ObjectChannelTest, ConcurrentClientsAndThreadsEachReadTheirOwnWrites) {
  auto shared = Client();
  ASSERT_TRUE(shared);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto own = Client();  // two threads on a connection of their own, two on the shared one
      ObjectPool* p = t % 2 ? own.get() : shared.get();
      for (int i = 0; i < 30; ++i) {
        const std::string name = "t" + std::to_string(t) + "/" + std::to_string(i);
        const std::string data(1000 + 997 * i, static_cast<char>('a' + t));
        ASSERT_FALSE(p->put(name, data));
        std::string back;
        ASSERT_FALSE(p->get(name, &back));
        ASSERT_EQ(back, data);
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> names;
  ASSERT_FALSE(shared->list("t3", &names));
  EXPECT_EQ(names.size(), 30u);
}

TEST_F(ObjectChannelTest, GoneDaemonAndStaleSocket) {
  auto client = Client();
  ASSERT_TRUE(client);
  server_.reset();  // the unmount
  std::string back;
  EXPECT_EQ(client->get("x", &back).code, EPIPE) << "the next call says the daemon is gone";
  EXPECT_FALSE(std::filesystem::exists(socket())) << "the server removes its socket";
  // A socket file nobody listens on (a daemon killed with -9): Open goes in-process.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strcpy(addr.sun_path, socket().c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  close(fd);
  pool_.reset();
  Error err;
  auto in_process = ObjectPool::Open(meta(), {}, &err);
  ASSERT_TRUE(in_process) << err.message;
  EXPECT_STREQ(in_process->path(), "in-process");
}

TEST_F(ObjectChannelTest, RefusesARegionThatCouldShrinkUnderTheDaemonAndAnotherVersion) {
  // The first request, on a connection of its own each time; the daemon answers on the socket and hangs up.
  auto first_request = [&](api::channel::Request rq, int memfd) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    strcpy(addr.sun_path, socket().c_str());
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    const std::span<const char> parts[] = {{reinterpret_cast<const char*>(&rq), sizeof(rq)}};
    EXPECT_TRUE(api::channel::SendAll(fd, parts, memfd));
    api::channel::Reply rp;
    EXPECT_TRUE(api::channel::RecvAll(fd, {reinterpret_cast<char*>(&rp), sizeof(rp)}));
    std::string text(rp.text_len, '\0');
    EXPECT_TRUE(api::channel::RecvAll(fd, text));
    char more;
    EXPECT_FALSE(api::channel::RecvAll(fd, {&more, 1})) << "the daemon hangs up after refusing";
    close(fd);
    return std::pair(rp.code, text);
  };
  const uint64_t size = api::channel::kPayloadOffset + (1 << 20);
  const int unsealed = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_EQ(ftruncate(unsealed, size), 0);
  auto [code, text] = first_request({api::channel::kMap, 0, api::channel::kVersion, size, 0}, unsealed);
  EXPECT_EQ(code, EINVAL) << text;
  close(unsealed);
  api::channel::Region sealed;
  ASSERT_FALSE(sealed.create(size));
  std::tie(code, text) = first_request({api::channel::kMap, 0, api::channel::kVersion, size * 2, 0}, sealed.fd());
  EXPECT_EQ(code, EINVAL) << "a size past the memfd's end: " << text;
  std::tie(code, text) = first_request({api::channel::kMap, 0, api::channel::kVersion + 1, size, 0}, sealed.fd());
  EXPECT_EQ(code, EPROTO) << "another version is refused: " << text;
  std::tie(code, text) = first_request({api::channel::kRead, 0, 0, 10, 0}, -1);
  EXPECT_EQ(code, EINVAL) << "no region mapped first: " << text;
}

}  // namespace
}  // namespace stripefs
