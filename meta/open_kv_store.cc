// SPDX-License-Identifier: Apache-2.0
// The one place that knows every kind of store a --meta argument can name.
#include "meta/etcd_kv_store.h"
#include "meta/kv_store.h"
#include "meta/write_behind_kv_store.h"

namespace stripefs::meta {

Result<std::unique_ptr<KvStore>> OpenKvStore(const std::string& meta, OpenMode mode) {
  if (!IsEtcdUri(meta)) return OpenRocksKvStore(meta, mode);
  SFS_ASSIGN_OR_RETURN(EtcdTarget target, ParseEtcdUri(meta));
  SFS_ASSIGN_OR_RETURN(std::unique_ptr<KvStore> etcd, OpenEtcdKvStore(target, mode));
  // The writer answers from memory and sends its commits behind the caller;
  // a reader has no writer's lock to make a cache safe.
  if (mode == OpenMode::kReadOnly) return etcd;
  return NewWriteBehindKvStore(std::move(etcd));
}

}  // namespace stripefs::meta
