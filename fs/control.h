// SPDX-License-Identifier: Apache-2.0
// The control interface of a mount: the virtual xattrs the daemon answers
// for the admin commands (`stripefs placement`, df, scrub, stats, add-drive)
// and the layout view, as Lustre and CephFS expose layouts. Each name and the
// JSON of its answer are fixed here, shared by the daemon (fs/control_server.h)
// and the CLI (tools/), so the two cannot drift apart. None of
// these names is stored or listed; setting one is refused (EPERM), except
// add_drive. Every name is a literal: .data() is NUL-terminated for getxattr(2).
//
// The kernel passes at most 64 KiB of xattr value: an answer that can grow
// past it comes in pages (placement) or is capped (scrub).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "engine/pool/layout.h"
#include "fs/evictor.h"

namespace stripefs::fs {

// Plain xattrs users set, kept beside what they govern and re-exported here:
// kPinXattr (fs/evictor.h: the evictor keeps the file), and the directory
// layout settings kStrategyXattr, kChunkSizeXattr, kReplicasXattr
// (engine/pool/layout.h).
using stripefs::kChunkSizeXattr;
using stripefs::kReplicasXattr;
using stripefs::kStrategyXattr;

// Of a regular file: the placement contract (DESIGN.md, `placement --json`)
// with "path" empty, the CLI fills in the path it was given:
// {"path":"","uri","size","chunk_size","chunks":[{"index","offset","length",
//   "replicas":[{"segment","path","offset","length","extents":[{"offset","length"}]}]}]}
// Fails with E2BIG once the answer passes 64 KiB (about 1,000 chunks): a file
// of any size is read in pages instead (below).
inline constexpr std::string_view kPlacementXattr = "user.stripefs.placement";

// Placement in pages: the name kPlacementPagePrefix + FIRST (a chunk index in
// decimal, e.g. "user.stripefs.placement.from.0") answers the document above
// with only the chunks from index FIRST on whose JSON fits kPlacementPageBytes
// (always at least one), and two more members:
//   "next": the FIRST of the next page, or null after the file's last chunk;
//   "ctime_ns": the file's change time when the page was read.
// A FIRST past the last chunk answers no chunks and "next": null. Pages are
// stateless: each is read from the chunk records as they are at that moment.
inline constexpr std::string_view kPlacementPagePrefix = "user.stripefs.placement.from.";
inline constexpr size_t kPlacementPageBytes = 48 << 10;  // leaves room below 64 KiB for the rest
std::string PlacementPageXattr(uint64_t first_chunk);
// FIRST of a page name; nullopt for any other name.
std::optional<uint64_t> PlacementPageFirst(std::string_view name);

// The CLI's side: reads the pages from chunk 0 on through get (a getxattr of
// the file) and joins them into the one placement document, as an unmounted
// pool gives it. A write between pages moves the file's ctime or size: then
// the whole file is read again, up to 3 times, before giving up (kBusy).
// Placement changes that move neither (the space trimmed off a chunk at the
// last close, a scrub's repair) can show in one page and not in the next;
// each chunk is still reported as one committed state of it.
Result<nlohmann::json> ReadPlacementPages(const std::function<Result<std::string>(const std::string& name)>& get);

// Of any file or directory of the mount: pool usage, the df contract plus the
// metadata directory's room:
// {"segments":[{"id","kind","path","capacity","used"}],
//  "metadata":{"path","used","free","reserve"}}
inline constexpr std::string_view kDfXattr = "user.stripefs.df";

// Of a regular file: reading it scrubs the file (see ObjectStore::scrub),
// repairing what an intact replica allows, and answers the report:
// {"chunks","bytes","repaired_blocks","missing_replicas",
//  "unrepairable":["line",...],"unrepairable_chunks"}
// "unrepairable" keeps the first kScrubLinesMax lines so the answer fits the
// kernel's 64 KiB; "unrepairable_chunks" counts them all. The daemon logs
// every line.
inline constexpr std::string_view kScrubXattr = "user.stripefs.scrub";
inline constexpr size_t kScrubLinesMax = 200;

// Of any file or directory of the mount: the mount's stats document, what
// `stripefs stats --json` prints and the metrics file renders:
// {"uptime_s","requests":{"<kind>":{"count","bytes","p50_us","p90_us","p99_us","max_us"}},
//  "errors":{"EIO","ENOSPC"},
//  "cache":{"capacity","bytes","entries","hits","misses","insertions","evictions"},
//  "dirty_bytes","eviction":{"mode","objects","bytes"},"repaired_blocks",
//  "segments":[as df],"metadata":{as df}}
inline constexpr std::string_view kStatsXattr = "user.stripefs.stats";

// Set on the mount root: adds a drive to the mounted pool (`stripefs
// add-drive MOUNTPOINT PATH[:SIZE]`); the value is {"path":"/abs","size":BYTES,
// "force":false}. setxattr(2) carries only an errno back, so the daemon keeps
// the outcome for the calling process: its getxattr of the same name answers
// {"ok":true,"id","path","capacity"} or {"ok":false,"error":"message"}.
inline constexpr std::string_view kAddDriveXattr = "user.stripefs.add_drive";

// user.stripefs.layout (read-only, engine/pool/layout.h): of a regular file
// the layout it was created with, of a directory the layout new files in it
// get: {"chunk_size","replicas","strategy"}.
using stripefs::kLayoutXattr;

// True for the names above (placement pages too) that the daemon answers
// rather than stores.
bool IsControlXattr(std::string_view name);

}  // namespace stripefs::fs
