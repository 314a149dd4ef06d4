// SPDX-License-Identifier: Apache-2.0
// The placement strategies and the Placer.
#include "engine/placement/placement.h"

#include <fmt/format.h>

#include <openssl/evp.h>

#include <algorithm>
#include <random>

namespace stripefs {
namespace {

// Positions start, start+1, ... around the ring: the preferred segment, then the next with room.
void RingFrom(uint64_t start, size_t n, std::vector<uint32_t>* order) {
  order->resize(n);
  uint32_t* out = order->data();
  size_t pos = start % n;
  for (size_t i = 0; i < n; ++i) {
    out[i] = static_cast<uint32_t>(pos);
    if (++pos == n) pos = 0;
  }
}

// splitmix64: a few instructions per draw and no state refill (a Mersenne
// Twister stalls every few hundred draws to regenerate its state, which shows
// in placement's tail latency).
struct FastRng {
  uint64_t state;
  using result_type = uint64_t;
  uint64_t operator()() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

FastRng& Rng() {
  thread_local FastRng rng{(uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()};
  return rng;
}

double FreeRatio(const SegmentView& s) {
  return s.capacity ? static_cast<double>(s.free) / static_cast<double>(s.capacity) : 0.0;
}

// Chunk i of an object prefers segment (H(uri) + i) mod N (DESIGN invariant 2).
class StripedStrategy final : public PlacementStrategy {
 public:
  std::string_view name() const override { return "striped"; }
  void rank(const PlacementRequest& req, std::span<const SegmentView> segs, std::vector<uint32_t>* order) const override {
    size_t n = segs.size();
    if (n == 0) return order->clear();
    RingFrom(req.object_hash % n + req.chunk_index % n, n, order);
  }
};

// Chunk i prefers segment i mod N, so every object starts on the first
// segment: the layout stripers used before starting each object on its own
// drive. Kept to measure that change (bench/stripe_bench) and for workloads
// of few, large objects where it makes no difference.
class RoundRobinStrategy final : public PlacementStrategy {
 public:
  std::string_view name() const override { return "round-robin"; }
  void rank(const PlacementRequest& req, std::span<const SegmentView> segs, std::vector<uint32_t>* order) const override {
    if (segs.empty()) return order->clear();
    RingFrom(req.chunk_index % segs.size(), segs.size(), order);
  }
};

// A uniformly random start, then the following segments in order.
class RandomStrategy final : public PlacementStrategy {
 public:
  std::string_view name() const override { return "random"; }
  void rank(const PlacementRequest&, std::span<const SegmentView> segs, std::vector<uint32_t>* order) const override {
    if (segs.empty()) return order->clear();
    RingFrom(Rng()() % segs.size(), segs.size(), order);
  }
};

// A handful of random candidates ranked by free ratio, best first; the rest
// follow in ring order as fallbacks.
class FreeRatioFirstStrategy final : public PlacementStrategy {
 public:
  static constexpr size_t kCandidates = 6;
  std::string_view name() const override { return "free-ratio-first"; }
  void rank(const PlacementRequest&, std::span<const SegmentView> segs, std::vector<uint32_t>* order) const override {
    size_t n = segs.size();
    if (n == 0) return order->clear();
    RingFrom(Rng()() % n, n, order);
    auto by_free_ratio = [&](uint32_t a, uint32_t b) { return FreeRatio(segs[a]) > FreeRatio(segs[b]); };
    std::stable_sort(order->begin(), order->begin() + static_cast<std::ptrdiff_t>(std::min(kCandidates, n)),
                     by_free_ratio);
  }
};

// Power of two choices: for each place in the order, two random segments not
// yet ranked, the one with the larger free ratio first. Keeps segments as
// balanced as ranking all of them, at the cost of two looks per replica.
class TwoChoiceStrategy final : public PlacementStrategy {
 public:
  std::string_view name() const override { return "two-choice"; }
  void rank(const PlacementRequest&, std::span<const SegmentView> segs, std::vector<uint32_t>* order) const override {
    size_t n = segs.size();
    order->resize(n);
    for (size_t i = 0; i < n; ++i) (*order)[i] = static_cast<uint32_t>(i);
    auto& rng = Rng();
    // Only the first places matter (one per replica); the rest stay in
    // position order as fallbacks.
    size_t places = std::min<size_t>(n, 3);
    for (size_t i = 0; i < places && i + 1 < n; ++i) {
      size_t left = n - i;
      size_t a = i + rng() % left, b = i + rng() % left;
      if (a == b) b = i + (b - i + 1) % left;
      size_t pick = FreeRatio(segs[(*order)[a]]) >= FreeRatio(segs[(*order)[b]]) ? a : b;
      std::swap((*order)[i], (*order)[pick]);
    }
  }
};

// Files of a `ram` directory: the RAM segment with the most room.
class RamStrategy final : public PlacementStrategy {
 public:
  std::string_view name() const override { return kRamStrategy; }
  bool ram_only() const override { return true; }
  void rank(const PlacementRequest&, std::span<const SegmentView> segs, std::vector<uint32_t>* order) const override {
    order->resize(segs.size());
    for (size_t i = 0; i < segs.size(); ++i) (*order)[i] = static_cast<uint32_t>(i);
    std::stable_sort(order->begin(), order->end(), [&](uint32_t a, uint32_t b) { return segs[a].free > segs[b].free; });
  }
};

}  // namespace

uint64_t ObjectHash(std::string_view uri) {
  // SHA-256 fetched once and a context per thread: EVP_Digest with
  // EVP_sha256() looks the algorithm up and makes a context on every call,
  // which took two thirds of its 0.3 us.
  static EVP_MD* const kSha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  struct Context {
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    ~Context() { EVP_MD_CTX_free(ctx); }
  };
  thread_local Context context;
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  if (!kSha256 || !context.ctx || !EVP_DigestInit_ex(context.ctx, kSha256, nullptr) ||
      !EVP_DigestUpdate(context.ctx, uri.data(), uri.size()) || !EVP_DigestFinal_ex(context.ctx, md, &md_len)) {
    EVP_Digest(uri.data(), uri.size(), md, &md_len, EVP_sha256(), nullptr);  // the same digest, the slow way
  }
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | md[i];
  return h;
}

const std::vector<std::string>& StrategyNames() {
  static const std::vector<std::string> kNames = {"striped", "random", "free-ratio-first", "two-choice",
                                                   "round-robin"};
  return kNames;
}

Result<std::unique_ptr<PlacementStrategy>> MakeStrategy(std::string_view name) {
  if (name == "striped") return std::unique_ptr<PlacementStrategy>(new StripedStrategy);
  if (name == "random") return std::unique_ptr<PlacementStrategy>(new RandomStrategy);
  if (name == "free-ratio-first") return std::unique_ptr<PlacementStrategy>(new FreeRatioFirstStrategy);
  if (name == "two-choice") return std::unique_ptr<PlacementStrategy>(new TwoChoiceStrategy);
  if (name == "round-robin") return std::unique_ptr<PlacementStrategy>(new RoundRobinStrategy);
  if (name == kRamStrategy) return std::unique_ptr<PlacementStrategy>(new RamStrategy);
  std::string all;
  for (const auto& n : StrategyNames()) all += (all.empty() ? "" : ", ") + n;
  return Status::Invalid("unknown strategy '" + std::string(name) + "' (choose one of: " + all + "; or " +
                         std::string(kRamStrategy) + " for a directory whose files live in RAM only)");
}

Placer::Placer(std::vector<Segment> segments) : segments_(std::move(segments)) {
  // Room for every id up to kMaxSegments (or past the largest given one), so
  // add() never reallocates a table place() may be reading.
  size_t ids = kMaxSegments;
  for (const Segment& s : segments_) ids = std::max<size_t>(ids, size_t{s.id} + 1);
  by_id_.assign(ids, nullptr);
  for (const Segment& s : segments_) by_id_[s.id] = s.allocator;
  count_.store(segments_.size(), std::memory_order_release);
  segments_.resize(ids);  // entries past count_ are not read until add() publishes them
}

Status Placer::add(Segment s) {
  std::lock_guard lock(add_mu_);
  const size_t n = count_.load(std::memory_order_relaxed);
  if (s.id >= by_id_.size() || n >= segments_.size()) {
    return Status::Invalid("segment " + std::to_string(s.id) + " is past the largest segment id " +
                           std::to_string(by_id_.size() - 1));
  }
  if (by_id_[s.id] != nullptr) return Status::Invalid("segment " + std::to_string(s.id) + " takes new chunks already");
  by_id_[s.id] = s.allocator;
  segments_[n] = s;
  count_.store(n + 1, std::memory_order_release);  // publishes both entries written above
  return Status::OK();
}

Result<std::vector<meta::Replica>> Placer::place(const PlacementStrategy& strategy, const PlacementRequest& req,
                                                 uint32_t want, uint32_t min) const {
  thread_local std::vector<SegmentView> views;
  thread_local std::vector<uint32_t> order;
  thread_local std::vector<const Segment*> candidates;  // the kind of segment the strategy places on
  const size_t n = count_.load(std::memory_order_acquire);  // one snapshot for the whole call
  candidates.clear();
  views.clear();
  for (size_t i = 0; i < n; ++i) {
    if (segments_[i].ram != strategy.ram_only()) continue;
    candidates.push_back(&segments_[i]);
    views.push_back({segments_[i].id, segments_[i].allocator->capacity(), segments_[i].allocator->free_bytes()});
  }
  if (candidates.empty() && strategy.ram_only()) {
    return Status::NoSpace("this pool has no RAM segment for files of a ram directory (stripefs mkfs --ram SIZE)");
  }
  strategy.rank(req, views, &order);
  std::vector<meta::Replica> placed;
  placed.reserve(want);
  for (uint32_t pos : order) {
    if (placed.size() == want) break;
    if (views[pos].free < req.length) continue;  // cheap skip; the allocator decides
    meta::Replica r{candidates[pos]->id, {}};
    if (req.spread) {
      if (!candidates[pos]->allocator->allocate_spread(req.length, &r.extents).ok()) continue;
    } else {
      auto off = candidates[pos]->allocator->allocate(req.length);
      if (!off.ok()) continue;
      r.extents.push_back({off.value(), req.length});
    }
    placed.push_back(std::move(r));
  }
  if (placed.size() < std::max<uint32_t>(min, 1)) {
    release(placed);
    // Cheap: a failed attempt to reserve ahead is routine; the caller that
    // gives up adds describe_free().
    return Status::NoSpace(fmt::format("no room for {} bytes{} on {} distinct {}s", req.length,
                                       req.spread ? "" : " in one run", std::max<uint32_t>(min, 1),
                                       strategy.ram_only() ? "RAM segment" : "drive"));
  }
  return placed;
}

void Placer::release(const std::vector<meta::Replica>& replicas) const {
  for (const meta::Replica& r : replicas) {
    for (const meta::Extent& e : r.extents) by_id_.at(r.segment)->release(e.offset, e.length);
  }
}

std::string Placer::describe_free(bool ram) const {
  std::string out;
  const size_t n = count_.load(std::memory_order_acquire);
  for (size_t i = 0; i < n; ++i) {
    const Segment& s = segments_[i];
    if (s.ram != ram) continue;
    out += fmt::format("{}{} {}: {} bytes free, longest run {}", out.empty() ? "" : "; ", ram ? "RAM segment" : "drive",
                       s.id, s.allocator->free_bytes(), s.allocator->largest_free_run());
  }
  return out.empty() ? "none takes new chunks" : out;
}

}  // namespace stripefs
