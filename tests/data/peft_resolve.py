#!/usr/bin/python3
"""peft_resolve.py - finds an adapter checkpoint's files the way PEFT and transformers do,
from the working directory it runs in, without them (standard library only).

    /usr/bin/python3 tests/data/peft_resolve.py ADAPTER_DIR

It follows, step by step, what these calls read (peft 0.13-0.17, transformers 4.4x):

1. AutoPeftModelForCausalLM.from_pretrained(ADAPTER_DIR) (peft/src/peft/auto.py):
   PeftConfig.from_pretrained reads ADAPTER_DIR/adapter_config.json; its
   base_model_name_or_path is passed as it is to AutoModelForCausalLM.from_pretrained, so a
   relative path is taken from the process's working directory, not from ADAPTER_DIR.
2. AutoModelForCausalLM.from_pretrained(base) (transformers modeling_utils.py): a local
   directory needs config.json and model.safetensors (or its index). With peft installed,
   find_adapter_config_file(base) looks for adapter_config.json in base first: if there is
   one, transformers loads its base_model_name_or_path instead and then loads those adapters
   into it, and AutoPeftModel would wrap adapters already loaded. So base must hold none.
3. Back in AutoPeftModel: ADAPTER_DIR/tokenizer_config.json, when present, makes PEFT resize
   the base's embeddings to the tokenizer's length: the vocabulary must already have it.
4. PeftModel.from_pretrained(model, ADAPTER_DIR) reads ADAPTER_DIR/adapter_model.safetensors:
   each "base_model.model.<module>.lora_A.weight" (r, in) and "...lora_B.weight" (out, r)
   on a base weight "<module>.weight" of those sizes (transposed for GPT-2's Conv1D, where
   PEFT sets fan_in_fan_out).
5. Without peft, AutoModelForCausalLM.from_pretrained(ADAPTER_DIR) would load a config.json
   and model.safetensors found beside the adapters as the model, dropping the adapters
   silently: there must be none there, so that it fails instead.

Prints "base <path as PEFT opens it>" and "ok"; exit 1 with the step that fails.
"""
import json
import os
import struct
import sys


def fail(step, why):
    print(f"step {step}: {why}")
    sys.exit(1)


def st_header(path):
    """The tensors of a safetensors file: name -> shape (its JSON header, read by hand)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
    return {k: v["shape"] for k, v in head.items() if k != "__metadata__"}


def main():
    adapter = sys.argv[1]
    path = os.path.join(adapter, "adapter_config.json")
    if not os.path.isfile(path):
        fail(1, f"no {path}")
    with open(path) as f:
        conf = json.load(f)
    base = conf.get("base_model_name_or_path")
    if not isinstance(base, str) or not os.path.isdir(base):
        fail(2, f"base_model_name_or_path {base!r} is no directory from {os.getcwd()}")
    for name in ("config.json", "model.safetensors"):
        if not os.path.isfile(os.path.join(base, name)):
            fail(2, f"the base {base} has no {name}")
    if "adapter_config.json" in os.listdir(base):
        fail(2, f"the base {base} holds adapter_config.json: transformers would load "
             "adapters into it")
    with open(os.path.join(base, "config.json")) as f:
        bconf = json.load(f)
    if os.path.isfile(os.path.join(adapter, "tokenizer_config.json")):
        with open(os.path.join(adapter, "tokenizer.json")) as f:
            t = json.load(f)
        ids = set(t["model"]["vocab"].values()) | {a["id"] for a in t.get("added_tokens", [])}
        if len(ids) != bconf.get("vocab_size"):
            fail(3, f"the tokenizer has {len(ids)} tokens, the base's vocab_size is "
                 f"{bconf.get('vocab_size')}: PEFT would resize the embeddings")
    weights = st_header(os.path.join(base, "model.safetensors"))
    lora = st_header(os.path.join(adapter, "adapter_model.safetensors"))
    r, fan = conf["r"], conf.get("fan_in_fan_out", False)
    for key, shape in lora.items():
        if not key.startswith("base_model.model.") or ".lora_" not in key:
            fail(4, f"{key} is no LoRA tensor")
        module = key[len("base_model.model."):key.index(".lora_")]
        w = weights.get(module + ".weight")
        if w is None:
            fail(4, f"{key}: the base has no {module}.weight")
        out, inp = (w[1], w[0]) if fan else (w[0], w[1])
        want = [r, inp] if ".lora_A." in key else [out, r]
        if shape != want:
            fail(4, f"{key} has shape {shape}, the base's {module}.weight needs {want}")
    for name in ("config.json", "model.safetensors", "pytorch_model.bin"):
        if os.path.exists(os.path.join(adapter, name)):
            fail(5, f"{name} beside the adapters: loaded without peft, they would be dropped")
    print(f"base {base}")
    print("ok")


if __name__ == "__main__":
    main()
