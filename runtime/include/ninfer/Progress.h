// A progress display for long work (loading, compiling, writing, benchmarks).
// On a terminal it redraws one line on stderr; otherwise it prints nothing
// until done, so logs stay readable.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unistd.h>

namespace ninfer {

class Progress {
public:
  Progress(std::string label, uint64_t total, bool enabled = true)
      : label_(std::move(label)), total_(total), tty_(enabled && isatty(2)),
        start_(std::chrono::steady_clock::now()) {}
  ~Progress() { finish(); }

  void update(uint64_t done) {
    if (!tty_ || finished_)
      return;
    auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - lastDraw_ < std::chrono::milliseconds(50))
      return;
    lastDraw_ = now;
    draw(done);
  }

  void finish() {
    if (finished_)
      return;
    finished_ = true;
    if (tty_) {
      draw(total_);
      std::fputc('\n', stderr);
    }
  }

  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

private:
  void draw(uint64_t done) {
    constexpr int kWidth = 30;
    double fraction = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
    int filled = static_cast<int>(fraction * kWidth);
    std::string bar(filled, '#');
    bar.resize(kWidth, '.');
    std::fprintf(stderr, "\r%-22s [%s] %3d%%  %.1fs", label_.c_str(), bar.c_str(),
                 static_cast<int>(fraction * 100), seconds());
    std::fflush(stderr);
  }

  std::string label_;
  uint64_t total_;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point lastDraw_{};
};

} // namespace ninfer
