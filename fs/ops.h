// SPDX-License-Identifier: Apache-2.0
// The FUSE low-level operations, by what they act on; MakeOps (fuse_fs.cc)
// puts them in the table libfuse calls. Each replies to its request itself,
// and turns a failing Status into errno only there (see frontend.h).
#pragma once

#include "fs/frontend.h"

namespace stripefs::fs {

// Names and directories (namespace_ops.cc): lookup, attributes, links,
// directory listings.
void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name);
void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*);
void OpReadlink(fuse_req_t req, fuse_ino_t ino);
void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t rdev);
void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode);
void OpSymlink(fuse_req_t req, const char* target, fuse_ino_t parent, const char* name);
void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char* name);
void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name);
void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name);
void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent, const char* newname,
              unsigned int flags);
void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, fuse_file_info* fi);
void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void OpReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info* fi);
void OpFsyncdir(fuse_req_t req, fuse_ino_t, int, fuse_file_info*);

// File data (file_ops.cc): open handles, read, write, setattr (it truncates),
// space, seek, sync.
void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set, fuse_file_info* fi);
void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info* fi);
void OpWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off, fuse_file_info* fi);
void OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length, fuse_file_info* fi);
void OpLseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info* fi);
void OpFlush(fuse_req_t req, fuse_ino_t, fuse_file_info*);
void OpRelease(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi);
void OpFsync(fuse_req_t req, fuse_ino_t, int, fuse_file_info* fi);
// Opens a handle on r and replies (with an entry too when created).
void OpenFile(fuse_req_t req, const meta::InodeRecord& r, fuse_file_info* fi, bool created);

// Extended attributes (xattr_ops.cc): stored ones, and the control names
// the daemon answers (fs/control.h).
void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size, int flags);
void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size);
void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name);

}  // namespace stripefs::fs
