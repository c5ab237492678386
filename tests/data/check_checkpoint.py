#!/usr/bin/python3
"""check_checkpoint.py - reads a checkpoint remat wrote with an independent reader and
computes the loss of one batch, to compare with the loss remat reports for that batch.

    /usr/bin/python3 tests/data/check_checkpoint.py CKPT_DIR DATA FORMAT B T [CURSOR]

CKPT_DIR holds config.json and model.safetensors; DATA is the training file, FORMAT "bytes"
or "llmc"; the batch is tokens[CURSOR : CURSOR+B*T+1] in llm.c's order. The safetensors
header is parsed by hand (gen_reference.st_read) and the model is the float64 PyTorch GPT-2
of gen_reference.py. Needs Debian's python3-torch; not run by make test (CI has no torch).
"""
import json
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_reference as ref  # noqa: E402


def main():
    ckpt, data, fmt, B, T = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
        int(sys.argv[5])
    cur = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    with open(os.path.join(ckpt, "config.json")) as f:
        c = json.load(f)
    weights = ref.st_read(os.path.join(ckpt, "model.safetensors"))
    P = {k: torch.tensor(v, dtype=torch.float64) for k, v in weights.items()}
    if fmt == "bytes":
        tok = np.frombuffer(open(data, "rb").read(), dtype=np.uint8).astype(np.int64)
    else:
        tok = ref.llmc_read(data).astype(np.int64)
    buf = torch.tensor(tok[cur:cur + B * T + 1])
    idx, tgt = buf[:-1].view(B, T), buf[1:].view(B, T)
    with torch.no_grad():
        _, loss = ref.forward(P, c, idx, tgt)
    print("%.9f" % loss.item())


if __name__ == "__main__":
    main()
