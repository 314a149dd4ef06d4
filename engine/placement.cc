// The placement strategies.
#include "engine/placement.h"

#include <openssl/evp.h>

#include <algorithm>
#include <random>

namespace stripefs {
namespace {

// Candidates in ring order from start: the preferred segment, then the next with room.
std::vector<uint32_t> RingFrom(uint64_t start, const std::vector<SegmentView>& drives) {
  std::vector<uint32_t> out;
  out.reserve(drives.size());
  for (size_t i = 0; i < drives.size(); ++i) out.push_back(drives[(start + i) % drives.size()].id);
  return out;
}

// Chunk i of an object prefers drive (H(uri) + i) mod N (DESIGN invariant 2).
class StripedStrategy final : public PlacementStrategy {
 public:
  std::string_view name() const override { return "striped"; }
  std::vector<uint32_t> rank(const PlacementRequest& req, const std::vector<SegmentView>& drives) const override {
    if (drives.empty()) return {};
    return RingFrom((req.object_hash % drives.size() + req.chunk_index % drives.size()) % drives.size(), drives);
  }
};

// A uniformly random start, then the next segments in order.
class RandomStrategy final : public PlacementStrategy {
 public:
  std::string_view name() const override { return "random"; }
  std::vector<uint32_t> rank(const PlacementRequest&, const std::vector<SegmentView>& drives) const override {
    if (drives.empty()) return {};
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return RingFrom(rng() % drives.size(), drives);
  }
};

// The drives with the largest share of free space first (ties: lower id).
class FreeRatioFirstStrategy final : public PlacementStrategy {
 public:
  std::string_view name() const override { return "free-ratio-first"; }
  std::vector<uint32_t> rank(const PlacementRequest&, const std::vector<SegmentView>& drives) const override {
    std::vector<SegmentView> sorted = drives;
    auto ratio = [](const SegmentView& s) { return s.capacity ? static_cast<double>(s.free) / static_cast<double>(s.capacity) : 0.0; };
    std::stable_sort(sorted.begin(), sorted.end(), [&](const SegmentView& a, const SegmentView& b) { return ratio(a) > ratio(b); });
    std::vector<uint32_t> out;
    for (const auto& s : sorted) out.push_back(s.id);
    return out;
  }
};

}  // namespace

uint64_t ObjectHash(std::string_view uri) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int md_len = 0;
  EVP_Digest(uri.data(), uri.size(), md, &md_len, EVP_sha256(), nullptr);
  uint64_t h = 0;
  for (int i = 0; i < 8; ++i) h = (h << 8) | md[i];
  return h;
}

const std::vector<std::string>& StrategyNames() {
  static const std::vector<std::string> kNames = {"striped", "random", "free-ratio-first"};
  return kNames;
}

Result<std::unique_ptr<PlacementStrategy>> MakeStrategy(std::string_view name) {
  if (name == "striped") return std::unique_ptr<PlacementStrategy>(new StripedStrategy);
  if (name == "random") return std::unique_ptr<PlacementStrategy>(new RandomStrategy);
  if (name == "free-ratio-first") return std::unique_ptr<PlacementStrategy>(new FreeRatioFirstStrategy);
  std::string all;
  for (const auto& n : StrategyNames()) all += (all.empty() ? "" : ", ") + n;
  return Status::Invalid("unknown strategy '" + std::string(name) + "' (choose one of: " + all + ")");
}

}  // namespace stripefs
