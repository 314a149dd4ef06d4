// SPDX-License-Identifier: Apache-2.0
// The one place that knows every kind of store a --meta argument can name.
#include "meta/etcd_kv_store.h"
#include "meta/kv_store.h"

namespace stripefs::meta {

Result<std::unique_ptr<KvStore>> OpenKvStore(const std::string& meta, OpenMode mode) {
  if (!IsEtcdUri(meta)) return OpenRocksKvStore(meta, mode);
  SFS_ASSIGN_OR_RETURN(EtcdTarget target, ParseEtcdUri(meta));
  return OpenEtcdKvStore(target, mode);
}

}  // namespace stripefs::meta
