#!/usr/bin/python3
"""gen_q4.py - reference cases for remat's 4-bit weights (kernels/cpu/kn_q4.c), written
independently of it: tests/data/q4/cases.json, read by tests/unit/test_q4.c.

What it computes, in plain Python (no numpy, no torch: float32 by rounding doubles through
struct, exact comparisons through fractions.Fraction):

- the levels: NF4's 16 NormalFloat values as the QLoRA paper and bitsandbytes publish them;
  FP4's magnitudes by code (bitsandbytes' table: 0, 0.0052083333, 0.66666667, 1, 0.33333333,
  0.5, 0.16666667, 0.25 for codes 0..7), code 8 and up the same negated;
- blockwise absmax quantization: each block of `block` consecutive elements takes its
  largest magnitude m; each element's x = w / m (float32, correctly rounded) goes to the
  level at the least exact distance |x - level|, a tie to the lower level (FP4: the sign is
  w's, the magnitude nearest to |x|, a tie to the smaller); a block of zeros codes level 0;
- packing: element 2j in byte j's high nibble, 2j+1 in the low one, an odd count padded
  with 0;
- dequantization: float32(level * m).

Each case: its weights, codes, absmaxes and dequantized values, float32 as their bit
patterns. Run from the repository root: /usr/bin/python3 tests/data/gen_q4.py; the output
is deterministic (random.Random with fixed seeds).
"""

import json
import os
import random
import struct
from fractions import Fraction

NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
       -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
       0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
       0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]
FP4_MAG = [0.0, 5.208333333e-03, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def bits(x):
    return struct.unpack("<I", struct.pack("<f", x))[0]


def levels(kind):
    """(code, float32 level) for every code of the type."""
    if kind == "nf4":
        return [(c, f32(v)) for c, v in enumerate(NF4)]
    return [(c, f32(FP4_MAG[c])) for c in range(8)] + \
           [(8 + c, -f32(FP4_MAG[c])) for c in range(8)]


def code_of(x, kind):
    if kind == "nf4":
        # least exact distance; a tie to the lower level
        return min(levels(kind), key=lambda cl: (abs(Fraction(x) - Fraction(cl[1])),
                                                 cl[1]))[0]
    mags = [(c, f32(FP4_MAG[c])) for c in range(8)]
    c = min(mags, key=lambda cm: (abs(abs(Fraction(x)) - Fraction(cm[1])), cm[1]))[0]
    return c | (8 if x < 0 else 0)


def quantize(w, block, kind):
    codes, absmax = [], []
    for b0 in range(0, len(w), block):
        blk = w[b0:b0 + block]
        m = max(abs(v) for v in blk)
        absmax.append(m)
        codes += [code_of(f32(v / m) if m > 0 else 0.0, kind) for v in blk]
    packed = bytearray()
    for j in range(0, len(codes), 2):
        lo = codes[j + 1] if j + 1 < len(codes) else 0
        packed.append(codes[j] << 4 | lo)
    lv = dict(levels(kind))
    deq = [f32(lv[c] * absmax[i // block]) for i, c in enumerate(codes)]
    return packed, absmax, deq


def ties(kind):
    """Weights of a block whose absmax is 1 and whose other values lie exactly on the
    midpoints between neighbouring levels (where float32 holds them): the tie rule."""
    if kind == "nf4":
        vals = sorted(f32(v) for v in NF4)
    else:
        vals = sorted(f32(v) for v in FP4_MAG)
    w = [1.0]
    for a, b in zip(vals, vals[1:]):
        mid = (Fraction(a) + Fraction(b)) / 2
        if Fraction(f32(float(mid))) == mid:
            w.append(float(mid))
            w.append(-float(mid))
    return w


def f32_exact(fr):
    """The float32 nearest the Fraction fr (a tie: the even one), exactly."""
    f = f32(float(fr))
    u = struct.unpack("<I", struct.pack("<f", f))[0]
    cands = [f] + [struct.unpack("<f", struct.pack("<I", v))[0] for v in (u - 1, u + 1)
                   if 0 <= v < 0x7f800000 or 0x80000000 <= v < 0xff800000]
    return min(cands, key=lambda c: (abs(Fraction(c) - fr),
                                     struct.unpack("<I", struct.pack("<f", c))[0] & 1))


def dynamic_map():
    """bitsandbytes' signed dynamic 8-bit map, each value exact then rounded once: for
    exponent e = 0..6, the 2**e means of neighbouring points of linspace(0.1, 1, 2**e + 1)
    times 10**(e - 6), and their negatives; 0 and 1; ascending."""
    vals = [0.0, 1.0]
    for e in range(7):
        pts = [Fraction(1, 10) + Fraction(9, 10) * Fraction(k, 2 ** e) for k in range(2 ** e + 1)]
        for a, b in zip(pts, pts[1:]):
            v = f32_exact((a + b) / 2 * Fraction(10) ** (e - 6))
            vals += [v, -v]
    assert len(vals) == 256
    return sorted(vals)


def double_quant(absmax, block=256):
    """QLoRA's double quantization of the absmax values: their mean (a double sum in
    order, over their count, to float32) taken off, then blocks of 256 scaled by their
    largest magnitude, each to the nearest map value (a tie: the lower); back as
    float32(float32(value * absmax2) + offset)."""
    dmap = dynamic_map()
    s = 0.0
    for v in absmax:
        s += v
    off = f32(s / len(absmax))
    q, a2, back = [], [], []
    for b0 in range(0, len(absmax), block):
        cen = [f32(v - off) for v in absmax[b0:b0 + block]]
        m = max(abs(v) for v in cen)
        a2.append(m)
        for v in cen:
            x = f32(v / m) if m > 0 else 0.0
            k = min(range(256), key=lambda i: (abs(Fraction(x) - Fraction(dmap[i])), i))
            q.append(k)
            back.append(f32(f32(dmap[k] * m) + off))
    return dmap, off, q, a2, back


def case(name, kind, block, w):
    w = [f32(v) for v in w]
    packed, absmax, deq = quantize(w, block, kind)
    return {"name": name, "type": kind, "block": block, "n": len(w),
            "w": [bits(v) for v in w], "codes": packed.hex(),
            "absmax": [bits(v) for v in absmax], "deq": [bits(v) for v in deq]}


def dq_case(name, absmax):
    """A double quantization case: absmax values in, the map, offset, codes, absmax2 and the
    absmax values back."""
    absmax = [f32(v) for v in absmax]
    dmap, off, q, a2, back = double_quant(absmax)
    return {"name": name, "absmax": [bits(v) for v in absmax], "map": [bits(v) for v in dmap],
            "offset": bits(off), "q": bytes(q).hex(), "absmax2": [bits(v) for v in a2],
            "back": [bits(v) for v in back]}


def main():
    cases = []
    for kind, seed in (("nf4", 1), ("fp4", 2)):
        r = random.Random(seed)
        gauss = [r.gauss(0.0, 0.02) for _ in range(1000)]
        cases.append(case(kind + "_normal_b64", kind, 64, gauss))
        # an odd count and a last block of 1 (257 = 4 x 64 + 1), a block of zeros, values
        # of every size, -0.0 and tiny negatives
        odd = [r.uniform(-3.0, 3.0) * 10 ** r.randint(-6, 2) for _ in range(257)]
        odd[64:128] = [0.0] * 64
        odd[130:134] = [-0.0, -1e-30, 1e-30, -1e-9]
        cases.append(case(kind + "_odd_b64", kind, 64, odd))
        cases.append(case(kind + "_normal_b128", kind, 128, gauss[:700]))
        cases.append(case(kind + "_ties_b64", kind, 64, ties(kind)))
    # double quantization: the absmax values of 1000 blocks of N(0, 0.02) weights (3 blocks
    # of 256 and a last of 232), and of a block of equal ones (all centred to 0)
    r = random.Random(3)
    absmax = [max(abs(r.gauss(0.0, 0.02)) for _ in range(64)) for _ in range(1000)]
    dq = [dq_case("dq_1000", absmax), dq_case("dq_equal", [0.5] * 300)]
    out = os.path.join(os.path.dirname(__file__), "q4", "cases.json")
    with open(out, "w") as f:
        json.dump({"generator": "tests/data/gen_q4.py", "cases": cases, "double": dq}, f,
                  indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
