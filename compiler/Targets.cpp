// The table of known cards. Memory sizes are what the driver reports as total
// memory (the marketing figure in GiB), architectures are compute capabilities, memory
// bandwidths the spec sheets' (GB/s).
#include "Targets.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

namespace ninfer {
namespace {

struct KnownCard {
  const char* name;
  const char* arch;
  double gib;
  double gbPerSecond;
};

constexpr uint64_t kGiB = 1ull << 30;

const KnownCard kCards[] = {
    {"h200", "sm_90a", 140.4, 4800},       {"h100", "sm_90a", 79.6, 3350},
    {"a100-80g", "sm_80", 79.2, 2039},     {"a100-40g", "sm_80", 39.4, 1555},
    {"l40s", "sm_89", 44.4, 864},          {"l4", "sm_89", 22.0, 300},
    {"rtx5090", "sm_120", 31.4, 1792},     {"rtx4090", "sm_89", 23.6, 1008},
    {"rtx4080-16g", "sm_89", 15.6, 717},   {"rtx4070-12g", "sm_89", 11.6, 504},
    {"rtx4060-8g", "sm_89", 7.6, 272},     {"rtx3090", "sm_86", 23.6, 936},
    {"rtx3080-10g", "sm_86", 9.8, 760},    {"rtx3060-12g", "sm_86", 11.6, 360},
    {"rtx3060-laptop", "sm_86", 5.8, 336}, {"t4", "sm_75", 14.6, 320},
};

// Architectures NVRTC 13 can target (TOOLCHAIN.md).
// sm_90a: sm_90 plus Hopper's architecture-specific instructions (wgmma); its code runs on
// compute capability 9.0 only.
const char* const kArchs[] = {"sm_75",  "sm_80",  "sm_86",  "sm_87",  "sm_88",
                              "sm_89",  "sm_90",  "sm_90a", "sm_100", "sm_103",
                              "sm_110", "sm_120", "sm_121"};

llvm::Expected<Target> parseOne(llvm::StringRef spec) {
  std::string lower = spec.trim().lower();
  for (const KnownCard& card : kCards)
    if (lower == card.name)
      return Target{lower, card.arch, static_cast<uint64_t>(card.gib * kGiB),
                    card.gbPerSecond * 1e9};
  for (const char* arch : kArchs)
    if (lower == arch)
      return Target{lower, arch, 0};
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("unknown target '{0}' (known: {1}, or an architecture {2})", spec.trim(),
                    [] {
                      std::string names;
                      for (const KnownCard& card : kCards)
                        names += (names.empty() ? "" : ", ") + std::string(card.name);
                      return names;
                    }(),
                    "sm_75 ... sm_121")
          .str());
}

} // namespace

llvm::Expected<std::vector<Target>> parseTargets(const std::string& spec) {
  std::vector<Target> targets;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(spec).split(parts, ',', -1, /*KeepEmpty=*/false);
  if (parts.empty())
    return llvm::createStringError(llvm::inconvertibleErrorCode(), "--target is empty");
  for (llvm::StringRef part : parts) {
    auto target = parseOne(part);
    if (!target)
      return target.takeError();
    targets.push_back(*target);
  }
  return targets;
}

bool everyTargetStreams(const std::vector<Target>& targets, double bytesPerSecond) {
  for (const Target& target : targets)
    if (target.bandwidth < bytesPerSecond)
      return false;
  return !targets.empty();
}

std::string knownTargetsHelp() {
  std::string text;
  for (const KnownCard& card : kCards)
    text += llvm::formatv("    {0,-16} {1,-7} {2,5:F1} GiB  {3,4:F0} GB/s\n", card.name, card.arch,
                          card.gib, card.gbPerSecond)
                .str();
  text += "    sm_XX            any architecture NVRTC supports (sm_75 ... sm_121), "
          "no memory check\n";
  text += "    sm_90a           sm_90 plus Hopper's wgmma (faster prefill); "
          "runs on 9.0 GPUs only\n";
  return text;
}

} // namespace ninfer
