// SPDX-License-Identifier: Apache-2.0
// The one place a Status becomes an errno (at the FUSE edge and the object API).
#include <cerrno>

#include "base/status.h"

namespace stripefs {

int ToErrno(const Status& s) {
  switch (s.code()) {
    case Code::kOk: return 0;
    case Code::kNotFound: return ENOENT;
    case Code::kExists: return EEXIST;
    case Code::kInvalidArgument: return EINVAL;
    case Code::kNoSpace: return ENOSPC;
    case Code::kIOError: return EIO;
    case Code::kCorruption: return EIO;
    case Code::kNotEmpty: return ENOTEMPTY;
    case Code::kNotDirectory: return ENOTDIR;
    case Code::kIsDirectory: return EISDIR;
    case Code::kNameTooLong: return ENAMETOOLONG;
    case Code::kPermission: return EPERM;
    case Code::kNoData: return ENODATA;
    case Code::kRange: return ERANGE;
    case Code::kTooBig: return E2BIG;
    case Code::kNotSupported: return EOPNOTSUPP;
    case Code::kBusy: return EBUSY;
    case Code::kCrossLink: return EXDEV;
    case Code::kPastEnd: return ENXIO;
  }
  return EIO;
}

}  // namespace stripefs
