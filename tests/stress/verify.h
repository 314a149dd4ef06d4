// SPDX-License-Identifier: Apache-2.0
// --verify-state of stripefs-stress: checks a pool after a crash against the
// state file the run kept (see stress.cc).
#pragma once

#include <string>

namespace stress {

// Checks the thread directories under dir against state_path; prints a
// VERIFY line of totals. Returns the exit status: 0 if nothing was lost or wrong.
int Verify(const std::string& dir, const std::string& state_path);

}  // namespace stress
