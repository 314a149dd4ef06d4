// SPDX-License-Identifier: Apache-2.0
// The stripefs object API in a few lines: store, read back by name and by
// URI, read a range, append, list, remove. Run it on a pool, mounted or not
// (a mounted one is reached through its daemon):
//
//   stripefs mkfs --meta /tmp/p/meta --drive /tmp/p/d0:256M --drive /tmp/p/d1:256M --ram 64M
//   object_api_example /tmp/p/meta
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "stripefs/objects.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s POOL_METADATA_DIR\n", argv[0]);
    return 2;
  }
  stripefs::api::Error err;
  auto pool = stripefs::api::ObjectPool::Open(argv[1], {}, &err);
  if (!pool) {
    std::fprintf(stderr, "cannot open the pool: %s\n", err.message.c_str());
    return 1;
  }
  std::printf("opened %s: %s\n", argv[1], pool->path());
  auto check = [](const stripefs::api::Error& e, const char* what) {
    if (e) {
      std::fprintf(stderr, "%s: %s\n", what, e.message.c_str());
      std::exit(1);
    }
  };

  std::string uri;
  check(pool->put("example/greeting", "hello, stripefs", &uri), "put");
  std::printf("put example/greeting -> %s\n", uri.c_str());

  std::string by_name, by_uri, range;
  check(pool->get("example/greeting", &by_name), "get by name");
  check(pool->get(uri, &by_uri), "get by uri");
  check(pool->read("example/greeting", 7, 8, &range), "read a range");
  std::printf("get by name: %s\nget by uri:  %s\nbytes 7-14:  %s\n", by_name.c_str(), by_uri.c_str(), range.c_str());

  check(pool->append("example/greeting", "!"), "append");
  check(pool->get("example/greeting", &by_name), "get after append");
  std::printf("after append: %s\n", by_name.c_str());

  std::vector<std::string> names;
  check(pool->list("example", &names), "list");
  std::printf("example/ holds %zu object(s)\n", names.size());

  check(pool->remove("example/greeting"), "remove");
  stripefs::api::Error gone = pool->get("example/greeting", &by_name);
  std::printf("get after remove: %s\n", gone ? gone.message.c_str() : "found (unexpected)");
  return gone.code == ENOENT ? 0 : 1;
}
