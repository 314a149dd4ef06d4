// SPDX-License-Identifier: Apache-2.0
#include "meta/etcd_txn.h"

#include <string_view>
#include <unordered_map>

namespace stripefs::meta {
namespace {

size_t OpBytes(const Transaction::Op& op) { return op.key.size() + op.value.size() + 16; }

void PutU32(std::string* out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

bool GetU32(std::string_view* in, uint32_t* v) {
  if (in->size() < 4) return false;
  *v = 0;
  for (int i = 0; i < 4; ++i) *v = (*v << 8) | static_cast<unsigned char>((*in)[i]);
  in->remove_prefix(4);
  return true;
}

}  // namespace

OpRefs LastOpPerKey(const Transaction& txn) {
  OpRefs out;
  std::unordered_map<std::string_view, size_t> slot;
  for (const Transaction::Op& op : txn.ops()) {
    auto [it, fresh] = slot.try_emplace(op.key, out.size());
    if (fresh) {
      out.push_back(&op);
    } else {
      out[it->second] = &op;
    }
  }
  return out;
}

bool FitsOneTxn(const OpRefs& ops) {
  if (ops.size() > kMaxTxnOps) return false;
  size_t bytes = 0;
  for (const Transaction::Op* op : ops) bytes += OpBytes(*op);
  return bytes <= kMaxTxnBytes;
}

std::vector<OpRefs> GroupsThatFit(const OpRefs& ops) {
  std::vector<OpRefs> groups;
  size_t bytes = 0;
  for (const Transaction::Op* op : ops) {
    if (groups.empty() || groups.back().size() == kMaxTxnOps || bytes + OpBytes(*op) > kMaxTxnBytes) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(op);
    bytes += OpBytes(*op);
  }
  return groups;
}

std::string EncodeOps(const OpRefs& ops) {
  std::string out;
  for (const Transaction::Op* op : ops) {
    out.push_back(op->is_delete ? 'd' : 'p');
    PutU32(&out, static_cast<uint32_t>(op->key.size()));
    out += op->key;
    PutU32(&out, static_cast<uint32_t>(op->value.size()));
    out += op->value;
  }
  return out;
}

Result<std::vector<Transaction::Op>> DecodeOps(std::string_view in) {
  std::vector<Transaction::Op> ops;
  while (!in.empty()) {
    const char kind = in.front();
    in.remove_prefix(1);
    uint32_t klen = 0, vlen = 0;
    if ((kind != 'd' && kind != 'p') || !GetU32(&in, &klen) || in.size() < klen) break;
    std::string key(in.substr(0, klen));
    in.remove_prefix(klen);
    if (!GetU32(&in, &vlen) || in.size() < vlen) break;
    ops.push_back({kind == 'd', std::move(key), std::string(in.substr(0, vlen))});
    in.remove_prefix(vlen);
    if (in.empty()) return ops;
  }
  if (in.empty() && ops.empty()) return ops;
  return Status::Corruption("a staged etcd commit does not decode");
}

}  // namespace stripefs::meta
