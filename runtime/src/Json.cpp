#include "ninfer/Json.h"

#include "Utf8.h"

#include <cstdio>

namespace ninfer {
namespace json {

namespace {

void appendEscaped(std::string& out, char32_t cp) {
  char buffer[16];
  if (cp >= 0x10000) {
    const char32_t v = cp - 0x10000;
    std::snprintf(buffer, sizeof(buffer), "\\u%04x\\u%04x", unsigned(0xD800 + (v >> 10)),
                  unsigned(0xDC00 + (v & 0x3FF)));
  } else {
    std::snprintf(buffer, sizeof(buffer), "\\u%04x", unsigned(cp));
  }
  out += buffer;
}

} // namespace

void appendString(std::string& out, std::string_view text, bool ensureAscii) {
  out += '"';
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (size_t pos = 0; pos < text.size();) {
    const unsigned char c = bytes[pos];
    if (c < 0x80) {
      ++pos;
      switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (c < 0x20 || (c == 0x7F && ensureAscii))
          appendEscaped(out, c);
        else
          out += char(c);
      }
      continue;
    }
    const utf8::Sequence s = utf8::checkSequence(bytes + pos, text.size() - pos);
    if (s.status != utf8::SequenceStatus::Valid) {
      if (ensureAscii)
        appendEscaped(out, 0xFFFD);
      else
        out += utf8::kReplacement;
    } else if (ensureAscii) {
      appendEscaped(out, s.codePoint);
    } else {
      out.append(text, pos, s.length);
    }
    pos += s.length;
  }
  out += '"';
}

std::string quoted(std::string_view text, bool ensureAscii) {
  std::string out;
  appendString(out, text, ensureAscii);
  return out;
}

} // namespace json
} // namespace ninfer
