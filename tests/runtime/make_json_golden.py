#!/usr/bin/env python3
"""Prints the JSON string literals Python's json.dumps writes for byte strings (decoded as
UTF-8 with errors="replace"), with ensure_ascii off and on, as the C++ table in JsonTest.cpp.
Run:
    python3 tests/runtime/make_json_golden.py
Needs only Python 3."""
import json

CASES = [
    b"plain text",
    b'quote " backslash \\ slash /',
    bytes(range(0x00, 0x20)),
    b"del \x7f tilde ~",
    "caf\u00e9 \u4e2d\u6587 \U0001F600 \u2028".encode(),
    b"lone continuation \x80 end",
    b"invalid lead \xff\xfe and \xc0\xaf overlong",
    b"surrogate \xed\xa0\x80 half",
    b"above U+10FFFF \xf4\x90\x80\x80 end",
    b"truncated at the end \xe2\x82",
    b"truncated inside \xf0\x9f\x98 then ascii",
    b"/tmp/plan dir/model.nplan",
]


def c_literal(data):
    # Printable ASCII as is, '"' and '\\' escaped, other bytes as three-digit octal escapes
    # (which, unlike \\x, cannot run on into the next character).
    out = []
    for b in data:
        if b in b'"\\':
            out.append("\\" + chr(b))
        elif 0x20 <= b < 0x7F and b != ord("?"):
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


print("// input bytes, json.dumps(ensure_ascii=False), json.dumps(ensure_ascii=True)")
for data in CASES:
    text = data.decode("utf-8", errors="replace")
    print(f"{{std::string({c_literal(data)}, {len(data)}),")
    print(f" {c_literal(json.dumps(text, ensure_ascii=False).encode())},")
    print(f" {c_literal(json.dumps(text, ensure_ascii=True).encode())}}},")
