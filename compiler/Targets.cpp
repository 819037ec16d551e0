// --target parsing over the card table (ninfer/Cards.h: the rows with a target name) and the
// architectures NVRTC can compile for.
#include "Targets.h"

#include "ninfer/Cards.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FormatVariadic.h"

namespace ninfer {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

// Architectures NVRTC 13 can target (TOOLCHAIN.md).
// sm_90a: sm_90 plus Hopper's architecture-specific instructions (wgmma); its code runs on
// compute capability 9.0 only.
const char* const kArchs[] = {"sm_75",  "sm_80",  "sm_86",  "sm_87",  "sm_88",
                              "sm_89",  "sm_90",  "sm_90a", "sm_100", "sm_103",
                              "sm_110", "sm_120", "sm_121"};

llvm::Expected<Target> parseOne(llvm::StringRef spec) {
  std::string lower = spec.trim().lower();
  for (const Card& card : kCards)
    if (card.target && lower == card.target)
      return Target{lower, card.arch, static_cast<uint64_t>(card.gib * kGiB),
                    card.specBytesPerSecond};
  for (const char* arch : kArchs)
    if (lower == arch)
      return Target{lower, arch, 0};
  return llvm::createStringError(
      llvm::inconvertibleErrorCode(),
      llvm::formatv("unknown target '{0}' (known: {1}, or an architecture {2})", spec.trim(),
                    [] {
                      std::string names;
                      for (const Card& card : kCards)
                        if (card.target)
                          names += (names.empty() ? "" : ", ") + std::string(card.target);
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
  for (const Card& card : kCards)
    if (card.target)
      text += llvm::formatv("    {0,-16} {1,-7} {2,5:F1} GiB  {3,4:F0} GB/s\n", card.target,
                            card.arch, card.gib, card.specBytesPerSecond / 1e9)
                  .str();
  text += "    sm_XX            any architecture NVRTC supports (sm_75 ... sm_121), "
          "no memory check\n";
  text += "    sm_90a           sm_90 plus Hopper's wgmma (faster prefill); "
          "runs on 9.0 GPUs only\n";
  return text;
}

} // namespace ninfer
