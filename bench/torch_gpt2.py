#!/usr/bin/python3
"""torch_gpt2.py - the PyTorch side of `make bench-torch`: a GPT-2 (the architecture of
design.md §5) trained with torch.optim.AdamW on the same shape as remat, in four modes: float32
and bf16 autocast (torch.autocast("cpu", torch.bfloat16), PyTorch's mixed precision on the
CPU), each without checkpointing and with every block checkpointed
(torch.utils.checkpoint, non-reentrant).

    /usr/bin/python3 bench/torch_gpt2.py L,C,NH,P,V BATCH SEQ THREADS STEPS [--saved]
        [--flush-denormal]

Each mode takes WARMUP (2) untimed steps and then STEPS timed steps; one JSON line per mode
with every step time (bench/torch.sh interleaves such runs with remat's and takes medians).
--saved adds the activations autograd keeps for backward (float32 modes);
--flush-denormal calls torch.set_flush_denormal(True) (Intel's tuning guide for PyTorch on
CPUs: on this machine a step that meets denormal numbers, the third here, takes 22 s instead
of 7). The rest of the tuning (the thread counts before import, the OpenBLAS kernel, OpenMP
waits, jemalloc and its MALLOC_CONF) is the environment's: bench/torch.sh sets it and this
prints what it found, and the GFLOP/s of the model's largest product (the lm_head's), which
bench/torch.sh holds against bench-sgemm's ceiling. Needs Debian's python3-torch; never run by make test.
"""
import json
import math
import os
import re
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.nh = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q = q.view(B, T, self.nh, -1).transpose(1, 2)
        k = k.view(B, T, self.nh, -1).transpose(1, 2)
        v = v.view(B, T, self.nh, -1).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, C, NH, P, V):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(P, C)
        self.h = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.ckpt = False

    def forward(self, idx, tgt):
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for b in self.h:
            x = checkpoint(b, x, use_reentrant=False) if self.ckpt else b(x)
        logits = self.ln_f(x) @ self.wte.weight.T
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), tgt.reshape(-1))


def saved_bytes(model, idx, tgt):
    """Bytes of activations autograd keeps for backward (the saved-tensor hooks see each;
    parameters, which matmuls save too, are not activations and are left out)."""
    seen, total = set(), [0]
    params = {p.storage().data_ptr() for p in model.parameters()}

    def pack(t):
        key = (t.data_ptr(), t.numel())
        if t.storage().data_ptr() in params:   # a weight or a view of one (wte.T)
            return t
        if key not in seen:
            seen.add(key)
            total[0] += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss = model(idx, tgt)
    loss.backward()
    model.zero_grad(set_to_none=True)
    return total[0]


MODES = (("fp32", False), ("fp32", True), ("bf16", False), ("bf16", True))
# Untimed steps before each mode's timed ones: the first step after a change of mode runs
# up to twice as long (the allocator and the OpenMP pool settling: 6.3 s, then 3.1 s, on
# gpt2-small here), and one warm-up left that in the median of two.
WARMUP = 2


def train_step(model, opt, idx, tgt, precision):
    if precision == "bf16":
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(idx, tgt)
    else:
        loss = model(idx, tgt)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()


def largest_product(B, T, C, V, reps=5):
    """GFLOP/s of the model's largest product, the lm_head's (B*T, C) @ (C, V), as torch.matmul
    runs it: float32 and under bf16 autocast, the median of `reps` after a warm-up. The tuning
    check of bench/torch.sh: a peer whose largest product is far below the BLAS ceiling
    measured beside it is mis-tuned, and every figure beside it false."""
    x, w = torch.randn(B * T, C), torch.randn(V, C)
    out = {"M": B * T, "N": V, "K": C}
    for prec in ("fp32", "bf16"):
        ts = []
        for r in range(reps + 1):
            t0 = time.perf_counter()
            if prec == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    x @ w.T
            else:
                x @ w.T
            ts.append(time.perf_counter() - t0)
        out["gflops_" + prec] = 2.0 * B * T * C * V / sorted(ts[1:])[reps // 2] / 1e9
    return out


def main():
    shape, B, T, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), int(sys.argv[5])
    want_saved = "--saved" in sys.argv[6:]
    flush = "--flush-denormal" in sys.argv[6:]
    if flush:
        torch.set_flush_denormal(True)
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    L, C, NH, P, V = (int(x) for x in shape.split(","))
    model = GPT(L, C, NH, P, V)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), weight_decay=0.1)
    data = torch.randint(0, 256, (steps + WARMUP + 1, B, T + 1))
    blas = re.search(r"BLAS_INFO=([^,]*)", torch.__config__.show())
    # Debian's torch takes the system's libblas.so.3: which one the alternatives chose
    libblas = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    print(json.dumps({"torch": torch.__version__, "threads": torch.get_num_threads(),
                      "blas": "%s (%s)" % (blas.group(1) if blas else "?", libblas),
                      "mkldnn": torch.backends.mkldnn.is_available(),
                      "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE"),
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
                      "ld_preload": os.environ.get("LD_PRELOAD"),
                      "malloc_conf": os.environ.get("MALLOC_CONF"),
                      "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                      "flush_denormal": flush}))
    print(json.dumps({"largest_product": largest_product(B, T, C, V)}), flush=True)
    for precision, ckpt in MODES:
        model.ckpt = ckpt
        times = []
        for s in range(steps + WARMUP):
            idx, tgt = data[s, :, :-1], data[s, :, 1:]
            t0 = time.perf_counter()
            train_step(model, opt, idx, tgt, precision)
            times.append((time.perf_counter() - t0) * 1e3)
        row = {"precision": precision, "mode": "checkpoint" if ckpt else "off",
               "step_ms": times[WARMUP:]}
        if want_saved and precision == "fp32":
            row["saved_mib"] = saved_bytes(model, data[0, :, :-1], data[0, :, 1:]) / 1048576
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
