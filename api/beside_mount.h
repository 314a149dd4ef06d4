// SPDX-License-Identifier: Apache-2.0
// The object API inside a mount's daemon, over the pool the mount serves, for
// the object channel (api/object_channel.h). The mount and the API then
// change the same namespace, so the API remembers no names, and tells the
// mount of each change it makes, for the kernel's caches and for the space
// of a file a mount's handle still holds.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "engine/pool/pool.h"
#include "stripefs/objects.h"

namespace stripefs::api {

struct MountHooks {
  // ino's contents or attributes changed: the kernel's cached pages of it and its attributes are stale.
  std::function<void(uint64_t ino)> data_changed;
  // The name in directory parent was made or removed: the kernel's entry for it is stale.
  std::function<void(uint64_t parent, std::string_view name)> entry_changed;
  // r lost a link: its space goes back once no handle of the mount holds it.
  std::function<void(const meta::InodeRecord& r)> unlinked;
};

// An ObjectPool over the mounted pool (which outlives it), writing through:
// no write-back buffer, so what a put stored is what the mount reads at once.
std::unique_ptr<ObjectPool> OpenBesideMount(Pool* pool, MountHooks hooks);

}  // namespace stripefs::api
