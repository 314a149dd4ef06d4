// The control interface's names (see control.h).
#include "fs/control.h"

namespace stripefs::fs {

bool IsControlXattr(std::string_view name) {
  return name == kPlacementXattr || name == kDfXattr || name == kScrubXattr || name == kStatsXattr ||
         name == kAddDriveXattr || name == kLayoutXattr;
}

}  // namespace stripefs::fs
