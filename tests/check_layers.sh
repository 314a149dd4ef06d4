#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The map of docs/design.md, checked: each layer includes only the layers below
# it, and no source file in engine/, fs/, meta/ or tools/ grows past 500 lines
# unless docs/design.md names it (a file that big usually holds two jobs).
#   usage: check_layers.sh [SOURCE_DIR]
set -uo pipefail
cd "${1:-$(dirname "$0")/..}" || exit 2

failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

# allowed LAYER_DIR PREFIX...: the project includes ("dir/file.h") of files in
# LAYER_DIR must start with one of the prefixes (its own folder among them).
allowed() {
  local dir=$1
  shift
  local pattern
  pattern=$(printf '%s|' "$@")
  pattern="^(${pattern%|})"
  while IFS=: read -r file line inc; do
    [[ $inc =~ \"([^\"]+)\" ]] || continue
    local target=${BASH_REMATCH[1]}
    [[ $target == */* ]] || continue  # a system or same-folder header
    [[ $target =~ $pattern ]] || fail "$file:$line includes \"$target\" (allowed for $dir: $*)"
  done < <(grep -rn --include='*.h' --include='*.cc' '^#include "' "$dir")
}

allowed base/ base/
allowed meta/ base/ meta/
allowed engine/io/ base/ engine/io/
allowed engine/placement/ base/ meta/ engine/io/ engine/placement/
allowed engine/store/ base/ meta/ engine/io/ engine/placement/ engine/store/
allowed engine/pool/ base/ meta/ engine/io/ engine/placement/ engine/store/ engine/pool/
allowed api/ base/ meta/ engine/ api/ stripefs/
allowed fs/ base/ meta/ engine/ fs/
# python/ sees only the public object API.
allowed python/ stripefs/
# tools/ is the top: it may include anything but test code.
allowed tools/ base/ meta/ engine/ api/ fs/ tools/ stripefs/

# Size: files over the limit must be named, with the reason, in docs/design.md.
while read -r lines file; do
  [[ $file == total ]] && continue
  head -n 1 "$file" | grep -q SPDX-License-Identifier && ((lines--))  # the license line is not code
  if ((lines > 500)) && ! grep -q "\`$file\`.*over 500 lines\|over 500 lines.*\`$file\`" docs/design.md; then
    fail "$file has $lines lines (over 500; split it by job, or say why in docs/design.md)"
  fi
done < <(find engine fs meta tools -name '*.h' -o -name '*.cc' | sort | xargs wc -l)

if ((failed)); then exit 1; fi
echo "layers: every include goes downward; no unexplained file over 500 lines"
