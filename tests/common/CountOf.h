// How many times `what` occurs in `text` (occurrences may overlap): for tests that check
// generated source or JSON.
#pragma once

#include <string>

namespace ninfer {
namespace test {

inline size_t countOf(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

} // namespace test
} // namespace ninfer
