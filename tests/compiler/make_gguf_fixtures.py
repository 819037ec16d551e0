#!/usr/bin/env python3
"""Writes tests/compiler/fixtures/gguf/reference.gguf with llama.cpp's gguf-py.

The file holds
  * one metadata entry of every GGUF value type (test.u8 .. test.f64, a bool, a
    string, arrays of integers, floats and strings, an array of arrays), whose
    values GgufFileTest expects (the literals below);
  * for each ggml type ninferc decodes (F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
    Q2_K .. Q6_K, IQ4_NL, IQ4_XS) a tensor "<type>" of 3 rows x 2 blocks of random codes (the f16
    scales set to N(0, 0.05^2) values so none is inf or NaN) and "<type>.ref", the
    same values as F32 decoded by gguf-py's quants.dequantize (numpy ports of
    ggml's dequantize_row_*).

Needs numpy and gguf-py (a llama.cpp source tree's gguf-py/, or `pip install gguf`).
Made with gguf-py from llama-cpp-python 0.3.36's vendor/llama.cpp, numpy 2.
Usage: PYTHONPATH=<llama.cpp>/gguf-py python3 make_gguf_fixtures.py
"""
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V
from gguf import GGUFWriter, quants

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "gguf", "reference.gguf")

# type -> (values per block, bytes per block, byte offsets of its f16 scale fields)
BLOCKS = {
    T.Q4_0: (32, 18, [0]), T.Q4_1: (32, 20, [0, 2]), T.Q5_0: (32, 22, [0]),
    T.Q5_1: (32, 24, [0, 2]), T.Q8_0: (32, 34, [0]), T.Q2_K: (256, 84, [80, 82]),
    T.Q3_K: (256, 110, [108]), T.Q4_K: (256, 144, [0, 2]), T.Q5_K: (256, 176, [0, 2]),
    T.Q6_K: (256, 210, [208]), T.IQ4_NL: (32, 18, [0]), T.IQ4_XS: (256, 136, [0]),
}
ROWS, BLOCKS_PER_ROW = 3, 2


def main():
    rng = np.random.default_rng(20261204)
    w = GGUFWriter(OUT, arch="test")
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_uint64("test.u64", 2**60 + 3)  # not a double: read exactly
    w.add_int64("test.i64", -(2**40))
    w.add_float64("test.f64", 1e-300)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo")
    w.add_array("test.int_array", [1, -2, 3])
    w.add_array("test.float_array", [0.5, -1.25])
    w.add_array("test.string_array", ["a", "", "\u00fc"])
    w.add_key_value("test.nested", [[1, 2], [3]], V.ARRAY, sub_type=V.ARRAY)

    for qtype, (values, nbytes, scales) in BLOCKS.items():
        raw = rng.integers(0, 256, size=(ROWS, BLOCKS_PER_ROW, nbytes), dtype=np.uint8)
        for offset in scales:
            d = (rng.standard_normal((ROWS, BLOCKS_PER_ROW)) * 0.05).astype(np.float16)
            raw[:, :, offset:offset + 2] = d.view(np.uint8).reshape(ROWS, BLOCKS_PER_ROW, 2)
        raw = raw.reshape(ROWS, BLOCKS_PER_ROW * nbytes)
        ref = quants.dequantize(raw, qtype).astype(np.float32)
        assert ref.shape == (ROWS, BLOCKS_PER_ROW * values) and np.isfinite(ref).all()
        w.add_tensor(qtype.name, raw, raw_dtype=qtype)
        w.add_tensor(qtype.name + ".ref", ref)
    floats = rng.standard_normal((ROWS, 64)).astype(np.float32)
    w.add_tensor("F16", floats.astype(np.float16))
    w.add_tensor("F16.ref", floats.astype(np.float16).astype(np.float32))
    bf16 = (floats.view(np.uint32) >> 16).astype(np.uint16)
    w.add_tensor("BF16", bf16, raw_dtype=T.BF16)
    w.add_tensor("BF16.ref", (bf16.astype(np.uint32) << 16).view(np.float32))

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"{OUT}: {os.path.getsize(OUT)} bytes")


if __name__ == "__main__":
    main()
