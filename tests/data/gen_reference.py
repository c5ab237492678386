#!/usr/bin/python3
"""gen_reference.py - PyTorch reference cases for the engine (tests/data/reference/*).

What it is: a plain GPT-2 written out by hand and computed in float64 from float32 initial
weights (pre-LayerNorm, tanh GELU, learned positions, tied lm_head, causal attention scaled
by 1/sqrt(hs), LayerNorm eps 1e-5, mean cross-entropy), trained with torch.optim.AdamW
(weight decay only on 2-D weights: wte, wpe and the linear weights), global-norm clipping
through torch.nn.utils.clip_grad_norm_ when grad_clip > 0, llm.c's data order, and the
engine's learning-rate schedule (eng_lr_at in engine/run/eng_train_step.c). Each case folder holds
the same files as the shipped tiny/ and odd/ (see reference/README.md):

    config.json           Hugging Face GPT-2 config, architecture only
    model.safetensors     initial float32 weights, HF names, Conv1D weights [in, out]
    train.bin             llm.c shard: 256 int32 header (20240520, 1, count), uint16 tokens
    job.json              the hyperparameters, schedule in the engine's job-spec form
    expected.safetensors  float32: loss.step{k}, logits [B,T,V] and grad.<name> of step 1
                          (before clipping), param.<name> after the last step

A case may also accumulate gradients (job.json "grad_accum": K; expected adds
micro_loss.step1.{j}) and evaluate (job.json "eval": {"every", "batches"}, a val.bin; expected
adds val_loss.step{s}); see train(). `generate greedy` writes reference/greedy/expected.json:
greedy decoding on the shipped tiny/ case (see generate_greedy()). `generate greedy_trained`
writes reference/greedy_trained/ (config.json, model.safetensors, expected.json): a small
model trained here on a periodic token pattern, and its greedy continuation of a prompt
(see GREEDY_TRAINED and generate_greedy_trained()).

The Llama family's cases (CASES with arch "llama": llama, llama_tied) use a plain Llama
written to Hugging Face's modeling_llama.py instead (llama_forward), with LlamaForCausalLM's
tensor names (nn.Linear weights [out, in]) and LlamaConfig's keys in config.json.

What it is not: part of the build. CI has no torch; the generated files are committed.

How to run it (Debian's python3-torch: `apt-get install python3-torch`; use /usr/bin/python3,
not a pyenv or venv python without torch), from the repository root:

    /usr/bin/python3 tests/data/gen_reference.py generate            # CASES, greedy*
    /usr/bin/python3 tests/data/gen_reference.py generate wide       # one case
    /usr/bin/python3 tests/data/gen_reference.py validate tests/data/reference/tiny

`validate` reruns this model on a shipped folder's own inputs (model.safetensors, train.bin,
job.json) and compares with its expected.safetensors, which was computed independently: the
float64 results here, rounded to float32, should equal the stored float32 values bit for bit
or within an ulp. Output is deterministic: the same torch build gives the same bytes.
"""

import argparse
import json
import math
import os
import struct
import sys

# The float64 matrix products go through OpenBLAS (Debian's torch is built against the generic
# libblas, OpenBLAS by default), which picks its kernels by CPU: an AVX-512 machine rounds
# differently from an AVX2 one in the last bits of the values whose true value is 0 (the
# key-bias gradients, ~1e-21, so a different float32 of round-off). The committed files were
# made with the Haswell (AVX2) kernels; pinning them makes `generate` give the same bytes on
# any x86-64 machine with AVX2. Must be set before numpy or torch loads OpenBLAS.
os.environ.setdefault("OPENBLAS_CORETYPE", "Haswell")

import numpy as np
import torch

torch.set_grad_enabled(True)

LLMC_MAGIC = 20240520   # llm.c's token shard header: magic, version 1, token count
LLMC_HEADER_INTS = 256
LN_EPS = 1e-5

# The new cases. Shapes chosen to hit what tiny/ and odd/ do not: wide has a head size (12)
# and a sequence length (45) that are not multiples of 8, a cosine schedule with warm-up and
# a data cursor that wraps (271 tokens, B*T = 90: steps 1-3 read from 0, 90, 180 - the last
# window ends exactly at the file's end - then the cursor returns to 0 for step 4); deep has
# five layers, a single head (hs = C), seq_len = n_positions and a constant schedule with
# warm-up.
CASES = {
    "wide": dict(n_layer=1, n_embd=96, n_head=8, n_positions=48, vocab_size=300,
                 batch=2, seq_len=45, steps=4, n_tokens=271, seed=23,
                 lr=2e-3, weight_decay=0.1, grad_clip=1.0,
                 schedule=dict(kind="cosine", warmup=2, min_lr_frac=0.2)),
    "deep": dict(n_layer=5, n_embd=32, n_head=1, n_positions=20, vocab_size=97,
                 batch=4, seq_len=20, steps=3, n_tokens=331, seed=31,
                 lr=5e-3, weight_decay=0.0, grad_clip=0.0,
                 schedule=dict(kind="constant", warmup=2, min_lr_frac=0.1)),
    # accum: gradient accumulation (3 micro-batches per optimizer step) and validation.
    # 347 tokens, B*T = 48: micro-batches 1-7 read from 0, 48, .., 288, then the cursor
    # returns to 0, so step 3's micro-batches read from 288, 0 and 48 (the wrap falls inside
    # one optimizer step). Clip 0.8 engages in step 1 only (accumulated gradient norms 0.887,
    # 0.775, 0.715). val.bin: 248 tokens of its own; each evaluation reads its first two
    # batches (from 0 and 48).
    "accum": dict(n_layer=2, n_embd=48, n_head=4, n_positions=32, vocab_size=211,
                  batch=2, seq_len=24, grad_accum=3, steps=3, n_tokens=7 * 48 + 1 + 10,
                  seed=37, lr=3e-3, weight_decay=0.1, grad_clip=0.8,
                  schedule=dict(kind="cosine", warmup=1, min_lr_frac=0.1),
                  n_val_tokens=5 * 48 + 1 + 7, eval=dict(every=2, batches=2)),
    # llama: the Llama family (arch "llama", see llama_forward): grouped-query attention (6
    # query heads on 2 key/value heads), a head size of 6 (not a power of two; rotary
    # embeddings need it even), an odd intermediate size, an untied lm_head, rope_theta
    # 10000, RMSNorm eps 1e-5; clipping engages in step 1, cosine schedule with warm-up.
    "llama": dict(arch="llama", n_layer=2, n_embd=36, n_head=6, n_kv_head=2,
                  intermediate_size=53, n_positions=32, vocab_size=211,
                  rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                  batch=2, seq_len=24, steps=3, n_tokens=3 * 48 + 1 + 13, seed=43,
                  lr=3e-3, weight_decay=0.1, grad_clip=1.0,
                  schedule=dict(kind="cosine", warmup=1, min_lr_frac=0.1)),
    # llama_tied: the same family with the lm_head tied to the embeddings, one key/value
    # head for all (multi-query), two layers, no clipping
    "llama_tied": dict(arch="llama", n_layer=2, n_embd=32, n_head=4, n_kv_head=1,
                       intermediate_size=40, n_positions=20, vocab_size=97,
                       rope_theta=500000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                       batch=3, seq_len=20, steps=2, n_tokens=2 * 60 + 1 + 7, seed=47,
                       lr=2e-3, weight_decay=0.05, grad_clip=0.0,
                       schedule=dict(kind="constant", warmup=0, min_lr_frac=0.1)),
    # lora_llama, lora_gpt2: LoRA adapters (PEFT's LoraLayer, see lin) on a frozen base, the
    # base and its adapters as PEFT saves them (adapter/: adapter_config.json with
    # base_model_name_or_path "..", adapter_model.safetensors). lora_llama's on q_proj and
    # v_proj (parts of the engine's one q|k|v product), o_proj and down_proj, r 4, alpha 8;
    # lora_gpt2's on every weight (c_attn, both c_proj, c_fc), r 3, alpha 12. A as PEFT
    # initialises it (kaiming-uniform, a = sqrt(5): uniform(-1/sqrt(in), 1/sqrt(in))); B
    # normal(0, 0.02), where PEFT starts it at zero, at which A's first gradient is zero.
    "lora_llama": dict(arch="llama", n_layer=2, n_embd=32, n_head=4, n_kv_head=2,
                       intermediate_size=44, n_positions=24, vocab_size=131,
                       rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=False,
                       batch=2, seq_len=20, steps=3, n_tokens=3 * 40 + 1 + 9, seed=53,
                       lr=3e-3, weight_decay=0.1, grad_clip=0.02,
                       schedule=dict(kind="cosine", warmup=1, min_lr_frac=0.1),
                       lora=dict(r=4, alpha=8.0,
                                 targets=["q_proj", "v_proj", "o_proj", "down_proj"])),
    "lora_gpt2": dict(n_layer=2, n_embd=48, n_head=4, n_positions=24, vocab_size=113,
                      batch=2, seq_len=24, steps=2, n_tokens=2 * 48 + 1 + 5, seed=59,
                      lr=2e-3, weight_decay=0.05, grad_clip=0.0,
                      schedule=dict(kind="constant", warmup=0, min_lr_frac=0.1),
                      lora=dict(r=3, alpha=12.0, targets=["c_attn", "c_proj", "c_fc"])),
}

# greedy: greedy decoding on the shipped tiny/ case (its folder is only read), from its
# initial weights and from its weights after its 3 steps (tiny/expected.safetensors'
# param.*). The prompt is tokens [start, start+length) of tiny/train.bin; each new token is
# the argmax of the last position's logits, with the whole sequence fed again every time.
GREEDY = dict(source="tiny", prompt_start=0, prompt_len=6, n_new=24, min_margin=1e-3)

# greedy_trained: greedy decoding on a model trained here until it has learned a pattern, so
# that its continuation is varied (the tiny model's repeats one token). The pattern is the
# infinite stream whose even positions cycle through cycle_a (period 7) and odd positions
# through cycle_b (period 5): token t = cycle_a[(t/2) % 7] for even t, cycle_b[(t/2) % 5] for
# odd t, period 70; each next token is the successor of the one two places back, so the model
# has to attend, not just learn bigrams. Training: init_weights(seed), then `steps` AdamW
# steps in float32 (betas 0.9, 0.95, eps 1e-8, no weight decay, no clipping; lr warm-up over
# `warmup` steps, then cosine down to lr * min_lr_frac) on batches of `batch` windows of
# seq_len + 1 tokens of the stream, each starting at a phase drawn from the same generator.
# The prompt is stream[prompt_phase : prompt_phase + prompt_len].
GREEDY_TRAINED = dict(n_layer=2, n_embd=64, n_head=4, n_positions=64, vocab_size=64, seed=41,
                      cycle_a=[3, 17, 42, 8, 55, 29, 61], cycle_b=[12, 40, 5, 33, 50],
                      steps=1000, batch=16, seq_len=48, lr=2e-3, warmup=20, min_lr_frac=0.1,
                      prompt_phase=0, prompt_len=8, n_new=32, min_margin=1e-3, min_distinct=5)
BETA1, BETA2, ADAM_EPS = 0.9, 0.95, 1e-8


# ---- files ---------------------------------------------------------------------------------

def st_read(path):
    """Reads a safetensors file (F32 only) into an ordered dict of float32 numpy arrays."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (path, name, info["dtype"])
        s, e = info["data_offsets"]
        arr = np.frombuffer(data[8 + n + s:8 + n + e], dtype="<f4")
        out[name] = arr.reshape(info["shape"]).copy()
    return out


def st_write(path, tensors):
    """Writes float32 tensors in the given order the way design.md §6 says: __metadata__
    {"format":"pt"}, offsets contiguous from 0, header padded with spaces to a multiple of 8."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, off = [], 0
    for name, t in tensors.items():
        a = np.array(t, dtype="<f4", order="C")    # (ascontiguousarray makes 0-d 1-d)
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def llmc_read(path):
    with open(path, "rb") as f:
        data = f.read()
    head = struct.unpack("<%di" % LLMC_HEADER_INTS, data[:4 * LLMC_HEADER_INTS])
    assert head[0] == LLMC_MAGIC and head[1] == 1, path
    tok = np.frombuffer(data[4 * LLMC_HEADER_INTS:], dtype="<u2")
    assert len(tok) == head[2], path
    return tok.astype(np.int64)


def llmc_write(path, tok):
    head = [0] * LLMC_HEADER_INTS
    head[0], head[1], head[2] = LLMC_MAGIC, 1, len(tok)
    with open(path, "wb") as f:
        f.write(struct.pack("<%di" % LLMC_HEADER_INTS, *head))
        f.write(np.asarray(tok, dtype="<u2").tobytes())


def write_json(path, obj):
    """Indented like the shipped files, no final newline."""
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=2))


def hf_config(c):
    if is_llama(c):
        return llama_hf_config(c)
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": c["vocab_size"], "n_positions": c["n_positions"],
        "n_embd": c["n_embd"], "n_layer": c["n_layer"], "n_head": c["n_head"],
        "n_inner": None, "activation_function": "gelu_new",
        "layer_norm_epsilon": LN_EPS, "resid_pdrop": 0.0, "embd_pdrop": 0.0,
        "attn_pdrop": 0.0, "initializer_range": 0.02, "tie_word_embeddings": True,
        "bos_token_id": c["vocab_size"] - 1, "eos_token_id": c["vocab_size"] - 1,
        "torch_dtype": "float32",
    }


# ---- the model -----------------------------------------------------------------------------

def param_names(n_layer):
    """GPT2LMHeadModel's names in its order, without lm_head (tied to wte)."""
    names = ["transformer.wte.weight", "transformer.wpe.weight"]
    for l in range(n_layer):
        p = "transformer.h.%d." % l
        names += [p + s for s in (
            "ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
            "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
            "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias")]
    return names + ["transformer.ln_f.weight", "transformer.ln_f.bias"]


def init_weights(c, gen):
    """float32 initial weights: normal(0, 0.02), c_proj weights 0.02/sqrt(2L); LayerNorm
    weights 1 + normal(0, 0.05), LayerNorm and linear biases normal(0, 0.02), so that no
    gradient is trivially the same as with the usual ones/zeros."""
    C, L, V, P = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"]

    def randn(*shape, std):
        return torch.randn(*shape, generator=gen, dtype=torch.float32) * std

    shapes = {"wte.weight": (V, C), "wpe.weight": (P, C),
              "ln_1.weight": (C,), "ln_1.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
              "ln_f.weight": (C,), "ln_f.bias": (C,),
              "attn.c_attn.weight": (C, 3 * C), "attn.c_attn.bias": (3 * C,),
              "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,),
              "mlp.c_fc.weight": (C, 4 * C), "mlp.c_fc.bias": (4 * C,),
              "mlp.c_proj.weight": (4 * C, C), "mlp.c_proj.bias": (C,)}
    out = {}
    for name in param_names(L):
        key = next(k for k in shapes if name.endswith("." + k))
        shape = shapes[key]
        if key.startswith("ln_") and key.endswith("weight"):
            t = 1.0 + randn(*shape, std=0.05)
        elif key.endswith("bias"):
            t = randn(*shape, std=0.02)
        elif key.endswith("c_proj.weight"):
            t = randn(*shape, std=0.02 / math.sqrt(2 * L))
        else:
            t = randn(*shape, std=0.02)
        out[name] = t.numpy()
    return out


def layer_norm(x, w, b):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)    # biased, as nn.LayerNorm
    return (x - mean) / torch.sqrt(var + LN_EPS) * w + b


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def lin(P, name, x, conv1d):
    """x through the linear weight `name` (its module's path, without ".weight"): a Linear's
    [out, in] weight (x W^T) or GPT-2's Conv1D [in, out] (x W, plus its bias); plus, when P
    has its LoRA adapters, PEFT's LoraLayer.forward: result + lora_B(lora_A(x)) * scaling,
    scaling = lora_alpha / r (P["lora.scaling"])."""
    W = P[name + ".weight"]
    y = x @ W + P[name + ".bias"] if conv1d else x @ W.T
    if name + ".lora_A.weight" in P:
        y = y + (x @ P[name + ".lora_A.weight"].T) @ P[name + ".lora_B.weight"].T \
            * P["lora.scaling"]
    return y


def forward(P, c, idx, tgt):
    """Returns (logits [B,T,V], mean cross-entropy). P: name -> float64 leaf tensor. With
    tgt None, the loss is None."""
    B, T = idx.shape
    C, NH = c["n_embd"], c["n_head"]
    hs = C // NH
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    x = P["transformer.wte.weight"][idx] + P["transformer.wpe.weight"][:T]
    for l in range(c["n_layer"]):
        p = "transformer.h.%d." % l
        h = layer_norm(x, P[p + "ln_1.weight"], P[p + "ln_1.bias"])
        qkv = lin(P, p + "attn.c_attn", h, True)                         # columns q|k|v
        q, k, v = qkv.split(C, dim=2)
        q = q.view(B, T, NH, hs).transpose(1, 2)                          # [B,NH,T,hs]
        k = k.view(B, T, NH, hs).transpose(1, 2)
        v = v.view(B, T, NH, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + lin(P, p + "attn.c_proj", y, True)
        h = layer_norm(x, P[p + "ln_2.weight"], P[p + "ln_2.bias"])
        u = gelu_tanh(lin(P, p + "mlp.c_fc", h, True))
        x = x + lin(P, p + "mlp.c_proj", u, True)
    x = layer_norm(x, P["transformer.ln_f.weight"], P["transformer.ln_f.bias"])
    logits = x @ P["transformer.wte.weight"].T                                # tied lm_head
    if tgt is None:
        return logits, None
    loss = torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1))
    return logits, loss


# ---- the Llama family ----------------------------------------------------------------------
#
# Written to Hugging Face's modeling_llama.py (transformers 4.4x), equation by equation:
#   LlamaRMSNorm.forward:   x * rsqrt(mean(x^2, -1) + eps), then weight * that
#   LlamaRotaryEmbedding:   inv_freq = 1 / theta^(arange(0, hd, 2) / hd), freqs = t * inv_freq,
#                           emb = cat(freqs, freqs), cos(emb), sin(emb) (HF rounds inv_freq to
#                           float32 first; here everything is float64)
#   apply_rotary_pos_emb:   q * cos + rotate_half(q) * sin, rotate_half(x) = cat(-x2, x1) of
#                           the head's two halves; the same for k
#   repeat_kv:              key/value head j serves query heads j*n_rep .. j*n_rep + n_rep-1
#   LlamaAttention:         softmax(q k^T / sqrt(hd) + causal mask) v, then o_proj
#   LlamaMLP.forward:       down_proj(act_fn(gate_proj(x)) * up_proj(x)), act_fn silu
#   LlamaDecoderLayer:      x + attn(input_layernorm(x)), then + mlp(post_attention_layernorm)
#   LlamaForCausalLM:       lm_head(norm(x)), lm_head tied to embed_tokens when
#                           tie_word_embeddings
# nn.Linear weights are [out, in] (y = x W^T), no biases anywhere.

def llama_hf_config(c):
    """LlamaConfig's keys, architecture only"""
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "vocab_size": c["vocab_size"], "hidden_size": c["n_embd"],
        "intermediate_size": c["intermediate_size"], "num_hidden_layers": c["n_layer"],
        "num_attention_heads": c["n_head"], "num_key_value_heads": c["n_kv_head"],
        "head_dim": c["n_embd"] // c["n_head"], "hidden_act": "silu",
        "max_position_embeddings": c["n_positions"], "rms_norm_eps": c["rms_norm_eps"],
        "rope_theta": c["rope_theta"], "rope_scaling": None, "attention_bias": False,
        "mlp_bias": False, "tie_word_embeddings": c["tie_word_embeddings"],
        "initializer_range": 0.02, "bos_token_id": 0, "eos_token_id": c["vocab_size"] - 1,
        "torch_dtype": "float32",
    }


def is_llama(c):
    return c.get("model_type") == "llama" or c.get("arch") == "llama"


def llama_param_names(c):
    """LlamaForCausalLM's names in its state_dict order (lm_head absent when tied)"""
    names = ["model.embed_tokens.weight"]
    L = c.get("num_hidden_layers", c.get("n_layer"))
    for l in range(L):
        p = "model.layers.%d." % l
        names += [p + s for s in (
            "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
            "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
            "mlp.down_proj.weight", "input_layernorm.weight",
            "post_attention_layernorm.weight")]
    names.append("model.norm.weight")
    if not c["tie_word_embeddings"]:
        names.append("lm_head.weight")
    return names


def llama_init_weights(c, gen):
    """float32 initial weights: normal(0, 0.02), o_proj and down_proj 0.02/sqrt(2L); RMSNorm
    weights 1 + normal(0, 0.05) (so that no gradient is trivially the ones' case)"""
    C, L, V, I = c["n_embd"], c["n_layer"], c["vocab_size"], c["intermediate_size"]
    hd = C // c["n_head"]
    shapes = {"embed_tokens.weight": (V, C), "lm_head.weight": (V, C),
              "q_proj.weight": (c["n_head"] * hd, C), "k_proj.weight": (c["n_kv_head"] * hd, C),
              "v_proj.weight": (c["n_kv_head"] * hd, C), "o_proj.weight": (C, c["n_head"] * hd),
              "gate_proj.weight": (I, C), "up_proj.weight": (I, C), "down_proj.weight": (C, I),
              "input_layernorm.weight": (C,), "post_attention_layernorm.weight": (C,),
              "norm.weight": (C,)}
    out = {}
    for name in llama_param_names(c):
        key = next(k for k in shapes if name.endswith("." + k) or name == k)
        shape = shapes[key]
        r = torch.randn(*shape, generator=gen, dtype=torch.float32)
        if len(shape) == 1:
            t = 1.0 + r * 0.05
        elif key in ("o_proj.weight", "down_proj.weight"):
            t = r * (0.02 / math.sqrt(2 * L))
        else:
            t = r * 0.02
        out[name] = t.numpy()
    return out


def rms_norm(x, w, eps):
    return w * (x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps))


def rotate_half(x):
    x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def llama_forward(P, c, idx, tgt):
    """Returns (logits [B,T,V], mean cross-entropy) as forward() does, for the Llama family"""
    B, T = idx.shape
    C, NH, NKV = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
    hd, eps, rep = C // NH, c["rms_norm_eps"], NH // NKV
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    freqs = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)                                  # [T, hd]
    cos, sin = emb.cos(), emb.sin()
    x = P["model.embed_tokens.weight"][idx]
    for l in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % l
        h = rms_norm(x, P[p + "input_layernorm.weight"], eps)
        q = lin(P, p + "self_attn.q_proj", h, False).view(B, T, NH, hd).transpose(1, 2)
        k = lin(P, p + "self_attn.k_proj", h, False).view(B, T, NKV, hd).transpose(1, 2)
        v = lin(P, p + "self_attn.v_proj", h, False).view(B, T, NKV, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(rep, dim=1)                                  # repeat_kv
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, NH * hd)
        x = x + lin(P, p + "self_attn.o_proj", y, False)
        h = rms_norm(x, P[p + "post_attention_layernorm.weight"], eps)
        g = lin(P, p + "mlp.gate_proj", h, False)
        u = lin(P, p + "mlp.up_proj", h, False)
        x = x + lin(P, p + "mlp.down_proj", torch.nn.functional.silu(g) * u, False)
    x = rms_norm(x, P["model.norm.weight"], eps)
    head = P["model.embed_tokens.weight" if c["tie_word_embeddings"] else "lm_head.weight"]
    logits = x @ head.T
    if tgt is None:
        return logits, None
    loss = torch.nn.functional.cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1))
    return logits, loss


def model_names(c):
    """The parameter names of config c (GPT-2's or the Llama family's), in file order"""
    return llama_param_names(c) if is_llama(c) else param_names(c["n_layer"])


def model_forward(P, c, idx, tgt):
    return (llama_forward if is_llama(c) else forward)(P, c, idx, tgt)


def lora_units(c):
    """(module path in a block, in, out) of every weight an adapter can sit on, in the
    engine's block order (eng_lora_units)"""
    C = c["n_embd"]
    if not is_llama(c):
        return [("attn.c_attn", C, 3 * C), ("attn.c_proj", C, C), ("mlp.c_fc", C, 4 * C),
                ("mlp.c_proj", 4 * C, C)]
    hd, I = C // c["n_head"], c["intermediate_size"]
    A, KV = c["n_head"] * hd, c["n_kv_head"] * hd
    return [("self_attn.q_proj", C, A), ("self_attn.k_proj", C, KV),
            ("self_attn.v_proj", C, KV), ("self_attn.o_proj", A, C), ("mlp.gate_proj", C, I),
            ("mlp.up_proj", C, I), ("mlp.down_proj", I, C)]


def lora_adapters(c):
    """[(name, shape)] of the adapters, PEFT's names less "base_model.model.": a module
    is targeted when its path is a target or ends with "." + target (target_modules)"""
    lo = c["lora"]
    out = []
    pre = "model.layers.%d." if is_llama(c) else "transformer.h.%d."
    for l in range(c["n_layer"]):
        for mod, fin, fout in lora_units(c):
            if any(mod == t or mod.endswith("." + t) for t in lo["targets"]):
                out.append(((pre % l) + mod + ".lora_A.weight", (lo["r"], fin)))
                out.append(((pre % l) + mod + ".lora_B.weight", (fout, lo["r"])))
    return out


def lora_init(c, gen):
    out = {}
    for name, shape in lora_adapters(c):
        if name.endswith("lora_A.weight"):
            bound = 1.0 / math.sqrt(shape[1])
            t = (torch.rand(*shape, generator=gen, dtype=torch.float32) * 2 - 1) * bound
        else:
            t = torch.randn(*shape, generator=gen, dtype=torch.float32) * 0.02
        out[name] = t.numpy()
    return out


def lr_at(job, i):
    """The engine's eng_lr_at for 0-based step index i (in float64; the engine rounds to
    float32, 1e-7 relative, far below the tolerances)."""
    lr, steps = job["lr"], job["steps"]
    s = job["schedule"]
    warmup = s["warmup"]
    if warmup > 0 and i < warmup:
        return lr * (i + 1) / warmup
    if s["kind"] == "constant" or steps <= warmup:
        return lr
    ratio = min(1.0, (i - warmup) / (steps - warmup))
    min_lr = lr * s["min_lr_frac"]
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)


def eval_loss(P, c, B, T, val, n_batches):
    """Validation loss: the mean over n_batches batches of val read from its start in llm.c's
    order (batch b = val[b*B*T : b*B*T + B*T + 1]), of each batch's mean cross-entropy."""
    assert n_batches * B * T + 1 <= len(val)
    with torch.no_grad():
        losses = []
        for b in range(n_batches):
            buf = val[b * B * T:b * B * T + B * T + 1]
            losses.append(model_forward(P, c, buf[:-1].view(B, T),
                                        buf[1:].view(B, T))[1].item())
    return sum(losses) / n_batches


def train(c, job, weights, tokens, val_tokens=None, info=None):
    """Runs job["steps"] optimizer steps; returns the expected tensors in the shipped files'
    order: loss.step1, logits, grad.*, loss.step2.., param.* (float64 numpy).

    With job["grad_accum"] = K > 1, each step reads K micro-batches in turn from the plain
    cursor, backpropagates each micro-batch's mean loss divided by K (so the gradient is the
    one of the mean of the K losses), then clips and steps once; loss.step{k} is that mean,
    micro_loss.step1.{j} the K losses of step 1, logits those of its first micro-batch.
    With job["eval"] = {"every", "batches"} and val_tokens, val_loss.step0 is the validation
    loss of the initial weights and val_loss.step{s} the one after step s, for s a multiple
    of every and for the last step. info, if given, receives the gradient norm of each step
    (before clipping) when clipping is on."""
    names = model_names(c)
    lora = job.get("lora")
    if lora:            # the base frozen, the adapters (lora["names"]) trained
        base, names = names, lora["names"]
    P = {n: torch.tensor(weights[n], dtype=torch.float64, requires_grad=True) for n in names}
    if lora:
        for n in base:
            P[n] = torch.tensor(weights[n], dtype=torch.float64)
        P["lora.scaling"] = lora["alpha"] / lora["r"]
    decay = [P[n] for n in names if P[n].dim() == 2]
    no_decay = [P[n] for n in names if P[n].dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": job["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=job["lr"], betas=(job["beta1"], job["beta2"]), eps=job["eps"])
    B, T = job["batch"], job["seq_len"]
    K = job.get("grad_accum", 1)
    ev = job.get("eval")
    tok = torch.tensor(tokens, dtype=torch.int64)
    val = None if val_tokens is None else torch.tensor(val_tokens, dtype=torch.int64)
    assert (ev is None) == (val is None)
    out = {}
    if ev is not None:
        out["val_loss.step0"] = np.array(eval_loss(P, c, B, T, val, ev["batches"]))
    cur = 0
    norms = []          # the global gradient norm of each step, before clipping
    for i in range(job["steps"]):
        for g in opt.param_groups:
            g["lr"] = lr_at(job, i)
        opt.zero_grad(set_to_none=True)
        micro = []
        for j in range(K):
            # llm.c's loader: read tok[cur : cur+B*T+1], advance, wrap when the next window
            # would not fit
            buf = tok[cur:cur + B * T + 1]
            idx, tgt = buf[:-1].view(B, T), buf[1:].view(B, T)
            cur += B * T
            if cur + B * T + 1 > len(tok):
                cur = 0
            logits, loss = model_forward(P, c, idx, tgt)
            if K == 1:
                loss.backward()
            else:
                (loss / K).backward()       # .grad accumulates the sum over micro-batches
            micro.append(loss.item())
            if i == 0 and j == 0:
                first_logits = logits.detach().numpy().copy()
        out["loss.step%d" % (i + 1)] = np.array(micro[0] if K == 1 else sum(micro) / K)
        if i == 0:
            if K > 1:
                for j in range(K):
                    out["micro_loss.step1.%d" % j] = np.array(micro[j])
            out["logits"] = first_logits
            for n in names:
                out["grad." + n] = P[n].grad.detach().numpy().copy()
        if job["grad_clip"] > 0:
            norm = torch.nn.utils.clip_grad_norm_([P[n] for n in names], job["grad_clip"])
            norms.append(norm.item())
        opt.step()
        s = i + 1
        if ev is not None and (s % ev["every"] == 0 or s == job["steps"]):
            out["val_loss.step%d" % s] = np.array(eval_loss(P, c, B, T, val, ev["batches"]))
    if norms:
        print("  gradient norm per step %s (clip %g)"
              % (" ".join("%.6g" % x for x in norms), job["grad_clip"]))
    if info is not None:
        info["grad_norms"] = norms
    for n in (base + names if lora else names):
        out["param." + n] = P[n].detach().numpy().copy()
    return out


# ---- commands ------------------------------------------------------------------------------

def job_from_file(path):
    """Reads a folder's job.json: the shipped form ("schedule": "constant") or ours."""
    with open(path) as f:
        j = json.load(f)
    s = j.get("schedule", "cosine")
    if isinstance(s, str):
        s = {"kind": s, "warmup": 0, "min_lr_frac": 0.1}
    o = j["optim"]
    job = dict(batch=j["batch"], seq_len=j["seq_len"], steps=j["steps"], lr=o["lr"],
               beta1=o["beta1"], beta2=o["beta2"], eps=o["eps"],
               weight_decay=o["weight_decay"], grad_clip=o["grad_clip"],
               schedule=dict(kind=s.get("kind", "cosine"), warmup=s.get("warmup", 0),
                             min_lr_frac=s.get("min_lr_frac", 0.1)))
    for key in ("grad_accum", "eval", "lora"):
        if key in j:
            job[key] = j[key]
    return job


def validate(folder):
    """Reruns a folder's case from its own inputs and compares with its expected file."""
    with open(os.path.join(folder, "config.json")) as f:
        c = json.load(f)
    job = job_from_file(os.path.join(folder, "job.json"))
    weights = st_read(os.path.join(folder, "model.safetensors"))
    tokens = llmc_read(os.path.join(folder, "train.bin"))
    val_tokens = llmc_read(os.path.join(folder, "val.bin")) if "eval" in job else None
    if "lora" in job:   # the adapters as PEFT saved them (write_adapter)
        with open(os.path.join(folder, "adapter", "adapter_config.json")) as f:
            ac = json.load(f)
        ad = st_read(os.path.join(folder, "adapter", "adapter_model.safetensors"))
        ad = {k[len("base_model.model."):]: v for k, v in ad.items()}
        job["lora"] = dict(r=ac["r"], alpha=ac["lora_alpha"], names=list(ad))
        weights = dict(weights, **ad)
    print("%s:" % folder)
    got = train(c, job, weights, tokens, val_tokens)
    ref = st_read(os.path.join(folder, "expected.safetensors"))
    assert set(got) == set(ref), sorted(set(got) ^ set(ref))
    # Two measures per tensor, the worst of each group printed. (1) The relative L2 error of
    # the float64 result against the stored float32: bounded below by float32 rounding,
    # ~3e-8. (2) The same after rounding the float64 result to float32: zero when both float64
    # computations agree to well below half an ulp, which is what "the same computation"
    # means here. Elements may still differ where the true value is 0 and both sides hold
    # float64 round-off (the key-bias gradients: softmax ignores a shift shared by all
    # keys, so they are ~1e-21 against a tensor scale of ~1e-2); hence L2, not ulps.
    groups = {"loss": [], "logits": [], "grad": [], "param": []}
    if "eval" in job:
        groups["val_loss"] = []
    if job.get("grad_accum", 1) > 1:
        groups["micro_loss"] = []
    for name in ref:
        r = ref[name].astype(np.float64).ravel()
        g64 = got[name].astype(np.float64).ravel()
        g32 = got[name].astype(np.float32).astype(np.float64).ravel()
        scale = max(np.linalg.norm(r), 1e-300)
        groups[name.split(".")[0]].append((
            np.linalg.norm(g64 - r) / scale, np.linalg.norm(g32 - r) / scale,
            int((g32 != r).sum()), r.size, name))
    ok = True
    for k, rows in groups.items():
        w64 = max(rows, key=lambda row: row[0])
        w32 = max(rows, key=lambda row: row[1])
        print("  %-6s float64 vs stored: worst rel L2 %.3g (%s)" % (k, w64[0], w64[4]))
        print("  %-6s rounded to float32: worst rel L2 %.3g (%s), %d of %d elements differ"
              % ("", w32[1], w32[4], sum(row[2] for row in rows), sum(row[3] for row in rows)))
        ok = ok and w64[0] < 1e-6 and w32[1] < 1e-10
    print("  %s" % ("MATCH" if ok else "MISMATCH"))
    return ok


def write_adapter(folder, c, adapters):
    """PEFT's save_pretrained of a LoRA model: adapter_config.json (LoraConfig's keys) and
    adapter_model.safetensors, its names "base_model.model." + the module's + lora_A/B"""
    os.makedirs(folder, exist_ok=True)
    lo = c["lora"]
    write_json(os.path.join(folder, "adapter_config.json"), {
        "peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": "..",
        "r": lo["r"], "lora_alpha": lo["alpha"], "target_modules": lo["targets"],
        "lora_dropout": 0.0, "bias": "none", "fan_in_fan_out": not is_llama(c),
        "init_lora_weights": True, "inference_mode": False, "modules_to_save": None,
        "use_rslora": False, "revision": None})
    st_write(os.path.join(folder, "adapter_model.safetensors"),
             {"base_model.model." + k: v for k, v in adapters.items()})


def generate(name, outdir):
    c = CASES[name]
    assert c["n_embd"] % c["n_head"] == 0 and c["seq_len"] <= c["n_positions"]
    llama = is_llama(c)
    assert not llama or (c["n_head"] % c["n_kv_head"] == 0 and (c["n_embd"] // c["n_head"]) % 2 == 0)
    job = dict(batch=c["batch"], seq_len=c["seq_len"], steps=c["steps"], lr=c["lr"],
               beta1=BETA1, beta2=BETA2, eps=ADAM_EPS, weight_decay=c["weight_decay"],
               grad_clip=c["grad_clip"], schedule=c["schedule"])
    K = c.get("grad_accum", 1)
    if K > 1:
        job["grad_accum"] = K
    if "eval" in c:
        job["eval"] = c["eval"]
    gen = torch.Generator().manual_seed(c["seed"])
    weights = (llama_init_weights if llama else init_weights)(c, gen)
    tokens = torch.randint(0, c["vocab_size"], (c["n_tokens"],), generator=gen).numpy()
    adapters = lora_init(c, gen) if "lora" in c else {}
    if adapters:
        job["lora"] = dict(r=c["lora"]["r"], alpha=c["lora"]["alpha"], names=list(adapters))
    val_tokens = None
    if "eval" in c:      # drawn after the training tokens, from the same generator
        val_tokens = torch.randint(0, c["vocab_size"], (c["n_val_tokens"],),
                                   generator=gen).numpy()
    folder = os.path.join(outdir, name)
    os.makedirs(folder, exist_ok=True)
    print("%s:" % folder)
    cfg = hf_config(c)
    write_json(os.path.join(folder, "config.json"), cfg)
    st_write(os.path.join(folder, "model.safetensors"), weights)
    llmc_write(os.path.join(folder, "train.bin"), tokens)
    if val_tokens is not None:
        llmc_write(os.path.join(folder, "val.bin"), val_tokens)
    spec = {"batch": c["batch"], "seq_len": c["seq_len"], "steps": c["steps"]}
    if K > 1:
        spec["grad_accum"] = K
    spec.update({
        "seed": c["seed"],
        "optim": {"lr": c["lr"], "beta1": BETA1, "beta2": BETA2, "eps": ADAM_EPS,
                  "weight_decay": c["weight_decay"], "grad_clip": c["grad_clip"]},
        "schedule": c["schedule"],
        "lr_per_step": [float("%.12g" % lr_at(job, i)) for i in range(c["steps"])],
    })
    if "eval" in c:
        spec["eval"] = c["eval"]
    if adapters:
        spec["lora"] = {k: c["lora"][k] for k in ("r", "alpha", "targets")}
        write_adapter(os.path.join(folder, "adapter"), c, adapters)
    spec["weight_decay_applies_to"] = (
        "2-D weights (embed_tokens, the linear weights, lm_head); not the RMSNorm weights"
        if llama else "2-D weights (wte, wpe, linear weights); not biases or LayerNorm")
    write_json(os.path.join(folder, "job.json"), spec)
    # Check what was written by reading it back the way validate does.
    assert all(np.array_equal(v, weights[k])
               for k, v in st_read(os.path.join(folder, "model.safetensors")).items())
    assert np.array_equal(llmc_read(os.path.join(folder, "train.bin")), tokens)
    if val_tokens is not None:
        assert np.array_equal(llmc_read(os.path.join(folder, "val.bin")), val_tokens)
    info = {}
    out = train(cfg, job, dict(weights, **adapters), tokens, val_tokens, info)
    if c["grad_clip"] > 0:
        assert info["grad_norms"][0] > c["grad_clip"], "clipping does not engage in step 1"
    st_write(os.path.join(folder, "expected.safetensors"), out)
    back = st_read(os.path.join(folder, "expected.safetensors"))
    assert list(back) == list(out) and all(back[k].shape == out[k].shape for k in out)
    print("  losses %s; lr per step %s" % (
        " ".join("%.6f" % out["loss.step%d" % (k + 1)] for k in range(c["steps"])),
        " ".join("%g" % lr_at(job, i) for i in range(c["steps"]))))
    if K > 1:
        print("  step 1 micro-batch losses %s" % " ".join(
            "%.6f" % out["micro_loss.step1.%d" % j] for j in range(K)))
    vals = sorted((int(k[len("val_loss.step"):]), v) for k, v in out.items()
                  if k.startswith("val_loss."))
    if vals:
        print("  val losses %s" % " ".join("step%d %.6f" % (st, v) for st, v in vals))


def greedy_decode(P, c, prompt, n_new):
    """Greedy decoding: n_new times, feeds the whole sequence, appends the argmax of the last
    position's logits. Returns (new ids, top1 - top2 logit per step). P: name -> tensor, of
    any float dtype (the computation is in that dtype)."""
    seq = list(prompt)
    new, margins = [], []
    assert len(prompt) + n_new - 1 <= c["n_positions"]
    with torch.no_grad():
        for _ in range(n_new):
            logits, _ = forward(P, c, torch.tensor([seq], dtype=torch.int64), None)
            last = logits[0, -1]
            top = torch.topk(last, 2)
            nxt = int(top.indices[0])
            assert nxt == int(torch.argmax(last))
            new.append(nxt)
            margins.append((top.values[0] - top.values[1]).item())
            seq.append(nxt)
    return new, margins


def generate_greedy(outdir, srcdir):
    """Writes <outdir>/greedy/expected.json from the shipped source folder under srcdir
    (only read)."""
    g = GREEDY
    src = os.path.join(srcdir, g["source"])
    with open(os.path.join(src, "config.json")) as f:
        c = json.load(f)
    names = param_names(c["n_layer"])
    init = st_read(os.path.join(src, "model.safetensors"))
    ref = st_read(os.path.join(src, "expected.safetensors"))
    trained = {n: ref["param." + n] for n in names}
    tokens = llmc_read(os.path.join(src, "train.bin"))
    prompt = [int(t) for t in tokens[g["prompt_start"]:g["prompt_start"] + g["prompt_len"]]]
    folder = os.path.join(outdir, "greedy")
    print("%s:" % folder)
    res = {}
    for label, w in (("init", init), ("trained", trained)):
        P64 = {n: torch.tensor(w[n], dtype=torch.float64) for n in names}
        ids, margins = greedy_decode(P64, c, prompt, g["n_new"])
        # the same in float32, as the engine computes: it must pick the same tokens
        P32 = {n: torch.tensor(w[n], dtype=torch.float32) for n in names}
        ids32, _ = greedy_decode(P32, c, prompt, g["n_new"])
        assert ids32 == ids, (label, "float32 decoding differs", ids, ids32)
        m = min(margins)
        print("  %-7s %s  min margin %.4g (step %d)" % (
            label, " ".join(map(str, ids)), m, margins.index(m) + 1))
        assert m >= g["min_margin"], (
            "%s: margin %.3g below %g; choose another GREEDY prompt" % (label, m,
                                                                         g["min_margin"]))
        res[label] = (ids, margins)
    # The trained weights above are tiny's float32 param.*; the unrounded float64 result of
    # its training must decode the same (an engine's weights differ from both by ~1e-5).
    out64 = train(c, job_from_file(os.path.join(src, "job.json")), init, tokens)
    P = {n: torch.tensor(out64["param." + n], dtype=torch.float64) for n in names}
    assert greedy_decode(P, c, prompt, g["n_new"])[0] == res["trained"][0]
    os.makedirs(folder, exist_ok=True)
    write_json(os.path.join(folder, "expected.json"), {
        "source": g["source"],
        "prompt_from": "%s/train.bin tokens [%d, %d)" % (
            g["source"], g["prompt_start"], g["prompt_start"] + g["prompt_len"]),
        "prompt": prompt,
        "n_new": g["n_new"],
        "init": res["init"][0],
        "trained": res["trained"][0],
        "min_margin_init": float("%.6g" % min(res["init"][1])),
        "min_margin_trained": float("%.6g" % min(res["trained"][1])),
        "margins_init": [float("%.6g" % x) for x in res["init"][1]],
        "margins_trained": [float("%.6g" % x) for x in res["trained"][1]],
        "weights": {"init": "%s/model.safetensors" % g["source"],
                    "trained": "%s/expected.safetensors param.*" % g["source"]},
    })


def pattern_stream(g, start, n):
    """Tokens [start, start + n) of GREEDY_TRAINED's pattern (see there)."""
    a, b = g["cycle_a"], g["cycle_b"]
    return [a[(t // 2) % len(a)] if t % 2 == 0 else b[(t // 2) % len(b)]
            for t in range(start, start + n)]


def train_pattern(g, c):
    """GREEDY_TRAINED's training (see there); returns the float32 weights (numpy) and the
    loss of the last step. Single-threaded, so that no reduction order depends on the
    machine's core count."""
    names = param_names(c["n_layer"])
    gen = torch.Generator().manual_seed(g["seed"])
    weights = init_weights(c, gen)
    P = {n: torch.tensor(weights[n], dtype=torch.float32, requires_grad=True) for n in names}
    opt = torch.optim.AdamW([P[n] for n in names], lr=g["lr"], betas=(BETA1, BETA2),
                            eps=ADAM_EPS, weight_decay=0.0)
    period = 2 * len(g["cycle_a"]) * len(g["cycle_b"])   # 2 * lcm, the cycles being coprime
    steps, warmup, lr, T = g["steps"], g["warmup"], g["lr"], g["seq_len"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for i in range(steps):
            if i < warmup:
                rate = lr * (i + 1) / warmup
            else:
                ratio = (i - warmup) / (steps - warmup)
                min_lr = lr * g["min_lr_frac"]
                rate = min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (lr - min_lr)
            for group in opt.param_groups:
                group["lr"] = rate
            phases = torch.randint(0, period, (g["batch"],), generator=gen).tolist()
            buf = torch.tensor([pattern_stream(g, p, T + 1) for p in phases], dtype=torch.int64)
            opt.zero_grad(set_to_none=True)
            _, loss = forward(P, c, buf[:, :-1], buf[:, 1:])
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(threads)
    return {n: P[n].detach().numpy().copy() for n in names}, loss.item()


def generate_greedy_trained(outdir):
    """Writes <outdir>/greedy_trained/: config.json, model.safetensors (the trained float32
    weights) and expected.json (greedy decoding from them, computed in float64)."""
    g = GREEDY_TRAINED
    c = hf_config(g)
    names = param_names(c["n_layer"])
    assert g["prompt_len"] + g["n_new"] - 1 <= c["n_positions"]
    folder = os.path.join(outdir, "greedy_trained")
    print("%s:" % folder)
    weights, last_loss = train_pattern(g, c)
    prompt = pattern_stream(g, g["prompt_phase"], g["prompt_len"])
    P64 = {n: torch.tensor(weights[n], dtype=torch.float64) for n in names}
    ids, margins = greedy_decode(P64, c, prompt, g["n_new"])
    with torch.no_grad():
        logits1 = forward(P64, c, torch.tensor([prompt], dtype=torch.int64), None)[0][0, -1]
    assert int(torch.argmax(logits1)) == ids[0]
    # the same in float32, as the engine computes: it must pick the same tokens
    P32 = {n: torch.tensor(weights[n], dtype=torch.float32) for n in names}
    assert greedy_decode(P32, c, prompt, g["n_new"])[0] == ids, "float32 decoding differs"
    m = min(margins)
    truth = pattern_stream(g, g["prompt_phase"] + g["prompt_len"], g["n_new"])
    print("  last training loss %.6f; prompt %s" % (last_loss, " ".join(map(str, prompt))))
    print("  greedy %s\n  min margin %.4g (step %d), %d distinct ids, %s the pattern" % (
        " ".join(map(str, ids)), m, margins.index(m) + 1, len(set(ids)),
        "follows" if ids == truth else "departs from"))
    assert m >= g["min_margin"], "margin %.3g below %g; train differently" % (m, g["min_margin"])
    assert len(set(ids)) >= g["min_distinct"], "continuation too repetitive"
    os.makedirs(folder, exist_ok=True)
    write_json(os.path.join(folder, "config.json"), c)
    st_write(os.path.join(folder, "model.safetensors"), weights)
    assert all(np.array_equal(v, weights[k])
               for k, v in st_read(os.path.join(folder, "model.safetensors")).items())
    write_json(os.path.join(folder, "expected.json"), {
        "prompt": prompt,
        "greedy": ids,
        "margins": [float("%.6g" % x) for x in margins],
        "min_margin": float("%.6g" % m),
        # float32 values, written with 9 significant digits: read back as float32 exactly
        "logits_step1": [float("%.9g" % x) for x in logits1.numpy().astype(np.float32)],
        "n_positions": c["n_positions"],
        "how": "init_weights(seed %d) then %d float32 AdamW steps (lr %g, warm-up %d, cosine "
               "to %g, batch %d x %d) on windows of a stream whose even positions cycle "
               "through %s and odd positions through %s; greedy and margins computed in "
               "float64 from the float32 weights in model.safetensors" % (
                   g["seed"], g["steps"], g["lr"], g["warmup"], g["lr"] * g["min_lr_frac"],
                   g["batch"], g["seq_len"], g["cycle_a"], g["cycle_b"]),
        "n_new": g["n_new"],
        "pattern_continuation": truth,
    })


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="write cases into tests/data/reference")
    g.add_argument("cases", nargs="*",
                   help="names from CASES, greedy or greedy_trained (default: all)")
    g.add_argument("--out", default=os.path.join(here, "reference"))
    v = sub.add_parser("validate", help="rerun shipped folders and compare")
    v.add_argument("folders", nargs="+")
    a = ap.parse_args()
    torch.manual_seed(0)     # nothing draws from it; set so that nothing can vary by accident
    if a.cmd == "generate":
        known = sorted(CASES) + ["greedy", "greedy_trained"]
        unknown = [n for n in a.cases if n not in known]
        if unknown:
            ap.error("unknown case %s; known: %s" % (", ".join(unknown), ", ".join(known)))
        for name in a.cases or known:
            if name == "greedy":
                generate_greedy(a.out, os.path.join(here, "reference"))
            elif name == "greedy_trained":
                generate_greedy_trained(a.out)
            else:
                generate(name, a.out)
        return 0
    return 0 if all([validate(f) for f in a.folders]) else 1


if __name__ == "__main__":
    sys.exit(main())
