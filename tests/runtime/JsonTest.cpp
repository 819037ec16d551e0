// ninfer::json::appendString against Python's json.dumps.
#include "ninfer/Json.h"

#include <gtest/gtest.h>

#include <string>

namespace ninfer {
namespace {

struct JsonCase {
  std::string input;
  const char* plain;     // json.dumps(text, ensure_ascii=False)
  const char* asciiOnly; // json.dumps(text, ensure_ascii=True)
};

// Printed by tests/runtime/make_json_golden.py (text: the bytes decoded as UTF-8 with
// errors="replace").
const JsonCase kCases[] = {
    {std::string("plain text", 10), "\"plain text\"", "\"plain text\""},
    {std::string("quote \" backslash \\ slash /", 27), "\"quote \\\" backslash \\\\ slash /\"",
     "\"quote \\\" backslash \\\\ slash /\""},
    {std::string("\000\001\002\003\004\005\006\007\010\011\012\013\014\015\016\017\020\021\022\023"
                 "\024\025\026\027\030\031\032\033\034\035\036\037",
                 32),
     "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000"
     "f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c"
     "\\u001d\\u001e\\u001f\"",
     "\"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r\\u000e\\u000"
     "f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001a\\u001b\\u001c"
     "\\u001d\\u001e\\u001f\""},
    {std::string("del \177 tilde ~", 13), "\"del \177 tilde ~\"", "\"del \\u007f tilde ~\""},
    {std::string("caf\303\251 \344\270\255\346\226\207 \360\237\230\200 \342\200\250", 21),
     "\"caf\303\251 \344\270\255\346\226\207 \360\237\230\200 \342\200\250\"",
     "\"caf\\u00e9 \\u4e2d\\u6587 \\ud83d\\ude00 \\u2028\""},
    {std::string("lone continuation \200 end", 23), "\"lone continuation \357\277\275 end\"",
     "\"lone continuation \\ufffd end\""},
    {std::string("invalid lead \377\376 and \300\257 overlong", 31),
     "\"invalid lead \357\277\275\357\277\275 and \357\277\275\357\277\275 overlong\"",
     "\"invalid lead \\ufffd\\ufffd and \\ufffd\\ufffd overlong\""},
    {std::string("surrogate \355\240\200 half", 18),
     "\"surrogate \357\277\275\357\277\275\357\277\275 half\"",
     "\"surrogate \\ufffd\\ufffd\\ufffd half\""},
    {std::string("above U+10FFFF \364\220\200\200 end", 23),
     "\"above U+10FFFF \357\277\275\357\277\275\357\277\275\357\277\275 end\"",
     "\"above U+10FFFF \\ufffd\\ufffd\\ufffd\\ufffd end\""},
    {std::string("truncated at the end \342\202", 23), "\"truncated at the end \357\277\275\"",
     "\"truncated at the end \\ufffd\""},
    {std::string("truncated inside \360\237\230 then ascii", 31),
     "\"truncated inside \357\277\275 then ascii\"", "\"truncated inside \\ufffd then ascii\""},
    {std::string("/tmp/plan dir/model.nplan", 25), "\"/tmp/plan dir/model.nplan\"",
     "\"/tmp/plan dir/model.nplan\""},
};

TEST(Json, StringsAsPythonWritesThem) {
  for (const JsonCase& c : kCases) {
    EXPECT_EQ(json::quoted(c.input), c.plain) << c.input;
    EXPECT_EQ(json::quoted(c.input, true), c.asciiOnly) << c.input;
  }
}

TEST(Json, AppendsAfterWhatIsThere) {
  std::string out = "[";
  json::appendString(out, "a\"b");
  json::appendString(out, "\xC3\xA9", true);
  EXPECT_EQ(out, "[" + json::quoted("a\"b") + json::quoted("\xC3\xA9", true));
}

} // namespace
} // namespace ninfer
