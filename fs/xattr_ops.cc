// SPDX-License-Identifier: Apache-2.0
// Extended attributes: the stored user.* ones (layout settings checked
// against the pool), and the control names the daemon answers (see
// fs/control.h and control_server.h).
#include <sys/stat.h>
#include <sys/xattr.h>

#include <cstring>
#include <string>
#include <string_view>

#include "engine/pool/layout.h"
#include "fs/control.h"
#include "fs/ops.h"

namespace stripefs::fs {

using meta::InodeRecord;

namespace {

bool IsUserXattr(const char* name) { return std::strncmp(name, "user.", 5) == 0; }

void ReplyXattr(fuse_req_t req, const std::string& value, size_t size) {
  if (size == 0) return (void)fuse_reply_xattr(req, value.size());
  if (size < value.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, value.data(), value.size());
}

}  // namespace

void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags) {
  if (!IsUserXattr(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  Frontend* f = F(req);
  if (IsControlXattr(name)) {
    const fuse_ctx* ctx = fuse_req_ctx(req);
    Status s = f->control().set(ino, name, std::string_view(value, size), {ctx->uid, ctx->pid});
    return (void)fuse_reply_err(req, ToErrno(s));
  }
  if (Status room = f->pool().check_metadata_room(); !room.ok()) return ReplyError(req, room, "setxattr");
  std::string_view v(value, size);
  std::string canonical;
  if (IsLayoutXattr(name)) {  // only on directories, and only values the pool can honour
    auto r = f->ns().get(ino);
    if (Failed(req, r, "setxattr")) return;
    if (!S_ISDIR(r->mode)) return (void)fuse_reply_err(req, EINVAL);
    auto checked = ValidateLayoutXattr(name, v, f->pool().config());
    if (!checked.ok()) {
      spdlog::warn("setxattr {} on inode {}: {}", name, ino, checked.status().message());
      return ReplyError(req, checked.status(), "setxattr");
    }
    canonical = std::move(checked).value();
    v = canonical;
  }
  Status s = f->ns().setxattr(ino, name, v, flags);
  fuse_reply_err(req, ToErrno(s));
}

void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  if (!IsUserXattr(name)) return (void)fuse_reply_err(req, ENODATA);
  if (IsControlXattr(name)) {
    const fuse_ctx* ctx = fuse_req_ctx(req);
    auto v = F(req)->control().get(ino, name, {ctx->uid, ctx->pid});
    if (Failed(req, v, "getxattr")) return;
    return ReplyXattr(req, v.value(), size);
  }
  auto v = F(req)->ns().getxattr(ino, name);
  if (Failed(req, v, "getxattr")) return;
  ReplyXattr(req, v.value(), size);
}

void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  auto names = F(req)->ns().listxattr(ino);
  if (Failed(req, names, "listxattr")) return;
  std::string all;
  for (const auto& n : names.value()) {
    all += n;
    all.push_back('\0');
  }
  ReplyXattr(req, all, size);
}

void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  if (!IsUserXattr(name)) return (void)fuse_reply_err(req, EOPNOTSUPP);
  Status s = F(req)->ns().removexattr(ino, name);
  fuse_reply_err(req, ToErrno(s));
}

}  // namespace stripefs::fs
