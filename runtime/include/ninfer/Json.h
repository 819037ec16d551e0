// JSON string literals (RFC 8259) for everything ninfer writes as JSON: the chat template's
// `tojson`, `ninfer inspect --json`, `ninfer bench --json` and its Chrome trace.
#pragma once

#include <string>
#include <string_view>

namespace ninfer {
namespace json {

// Appends `text` to `out` as a JSON string literal, quotes included, as Python's json.dumps
// writes a str: '"' and '\' escaped, \n \r \t \b \f by name, the other control characters as
// \u00xx. Ill-formed UTF-8 becomes U+FFFD, one per maximal ill-formed subpart (as Python's
// bytes.decode(..., "replace")). ensureAscii (json.dumps' default): DEL and every non-ASCII
// character as \uxxxx, those above U+FFFF as a UTF-16 surrogate pair.
void appendString(std::string& out, std::string_view text, bool ensureAscii = false);

// The same, as a new string.
std::string quoted(std::string_view text, bool ensureAscii = false);

} // namespace json
} // namespace ninfer
