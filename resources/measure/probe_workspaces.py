#!/usr/bin/env python3
"""Measures the library workspaces memplan cannot derive from PyTorch's source: cuDNN convolution workspaces
(forward, backward-data, backward-weight) and cuDNN attention workspaces, on the GPU this runs on.

Each op runs alone with the allocator's history recorded; a workspace is an allocation the op frees before it
returns. Sizes are the exact requested bytes. Writes one JSON file:

    python3 resources/measure/probe_workspaces.py --out DIR [--batches 1,2,4,...] [--time-budget SECONDS]

Conv configurations are those of torchvision's ResNets and ViTs at 224 px (memplan's presets); PyTorch's defaults
(cudnn.benchmark off, deterministic off). The GPU, PyTorch and cuDNN versions go in the file.
"""
import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

# (in_channels, out_channels, kernel, stride, padding, input H=W, input needs grad)
CONVS = sorted(
    {
        # ResNet stem, basic blocks (18/34) and bottlenecks (50/101/152)
        (3, 64, 7, 2, 3, 224, False),
        (64, 64, 3, 1, 1, 56, True),
        (64, 128, 3, 2, 1, 56, True),
        (64, 128, 1, 2, 0, 56, True),
        (128, 128, 3, 1, 1, 28, True),
        (128, 256, 3, 2, 1, 28, True),
        (128, 256, 1, 2, 0, 28, True),
        (256, 256, 3, 1, 1, 14, True),
        (256, 512, 3, 2, 1, 14, True),
        (256, 512, 1, 2, 0, 14, True),
        (512, 512, 3, 1, 1, 7, True),
        (64, 64, 1, 1, 0, 56, True),
        (64, 256, 1, 1, 0, 56, True),
        (256, 64, 1, 1, 0, 56, True),
        (256, 128, 1, 1, 0, 56, True),
        (128, 128, 3, 2, 1, 56, True),
        (128, 512, 1, 1, 0, 28, True),
        (256, 512, 1, 2, 0, 56, True),
        (512, 128, 1, 1, 0, 28, True),
        (512, 256, 1, 1, 0, 28, True),
        (256, 256, 3, 2, 1, 28, True),
        (256, 1024, 1, 1, 0, 14, True),
        (512, 1024, 1, 2, 0, 28, True),
        (1024, 256, 1, 1, 0, 14, True),
        (1024, 512, 1, 1, 0, 14, True),
        (512, 512, 3, 2, 1, 14, True),
        (512, 2048, 1, 1, 0, 7, True),
        (1024, 2048, 1, 2, 0, 14, True),
        (2048, 512, 1, 1, 0, 7, True),
        # ViT-B/16 and ViT-L/16 patch embeddings
        (3, 768, 16, 16, 0, 224, False),
        (3, 1024, 16, 16, 0, 224, False),
    }
)

def small_image_convs():
    """Convolutions people write in their own convnets (memplan's layer lists) at 32 to 256 px: a 3-channel
    stem, same-width 3x3 convs, and the 3x3 / 1x1 convs that double the width (strides 1 and 2)."""
    out = set()
    for size, widest in ((32, 512), (64, 256), (128, 128), (256, 64)):
        for c in (16, 32, 64):
            out.add((3, c, 3, 1, 1, size, False))
        for c in (16, 32, 64, 128, 256, 512):
            if c <= widest:
                out.add((c, c, 3, 1, 1, size, True))
        for c in (16, 32, 64, 128, 256):
            if c <= widest:
                out.add((c, 2 * c, 3, 2, 1, size, True))
                out.add((c, 2 * c, 3, 1, 1, size, True))
                out.add((c, 2 * c, 1, 2, 0, size, True))
    return sorted(out)


# ResNet-18's and ResNet-34's convolutions alone: to measure them at the batches a whole GPU reaches (thousands)
RESNET18 = [c for c in CONVS if c[:6] in {
    (3, 64, 7, 2, 3, 224), (64, 64, 3, 1, 1, 56), (64, 128, 3, 2, 1, 56), (64, 128, 1, 2, 0, 56), (128, 128, 3, 1, 1, 28),
    (128, 256, 3, 2, 1, 28), (128, 256, 1, 2, 0, 28), (256, 256, 3, 1, 1, 14), (256, 512, 3, 2, 1, 14),
    (256, 512, 1, 2, 0, 14), (512, 512, 3, 1, 1, 7)}]

GRIDS = {"torchvision": CONVS, "small-images": small_image_convs(), "resnet18": RESNET18}

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}

# (B, Hq, Hkv, L, D, dtype, causal, dropout)
ATTENTION = [
    (2, 32, 32, 1024, 128, "bfloat16", True, 0.0),
    (2, 32, 8, 1024, 128, "bfloat16", True, 0.0),
    (4, 32, 4, 512, 64, "bfloat16", True, 0.0),
    (1, 32, 8, 2048, 128, "float16", True, 0.0),
    (8, 12, 12, 512, 64, "bfloat16", True, 0.1),
    (4, 16, 16, 1000, 64, "bfloat16", False, 0.1),
    (2, 28, 4, 777, 128, "bfloat16", True, 0.0),
    (3, 14, 2, 512, 64, "bfloat16", True, 0.0),
    (2, 64, 8, 512, 128, "bfloat16", True, 0.0),
    (4, 12, 12, 197, 64, "float16", False, 0.0),
    (2, 16, 16, 256, 80, "bfloat16", True, 0.0),
]


def record(fn):
    """Runs fn with the allocator history on; returns [(action, size, addr)] of the device trace."""
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=100000)
    try:
        fn()
        torch.cuda.synchronize()
        snap = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][0] if snap["device_traces"] else []
    return [(e["action"], e["size"], e["addr"]) for e in trace if e["action"] in ("alloc", "free_completed")]


def transient(events):
    """Sizes of allocations freed within the recorded call, in allocation order."""
    live = {}
    out = []
    for action, size, addr in events:
        if action == "alloc":
            live[addr] = len(out)
            out.append([size, False])
        elif addr in live:
            out[live.pop(addr)][1] = True
    return [size for size, freed in out if freed]


def probe_conv(cfg, batch, dtype):
    cin, cout, k, s, p, hw, input_grad = cfg
    x = torch.randn(batch, cin, hw, hw, device="cuda", dtype=dtype)
    w = torch.randn(cout, cin, k, k, device="cuda", dtype=dtype)
    y = torch.empty(0)

    def fwd():
        nonlocal y
        y = F.conv2d(x, w, None, s, p)

    forward = transient(record(fwd))
    g = torch.randn_like(y)
    result = {"forward": forward}
    for name, mask in (("backward_data", [True, False, False]), ("backward_weight", [False, True, False])):
        if name == "backward_data" and not input_grad:
            continue
        keep = []

        def bwd():
            keep.append(torch.ops.aten.convolution_backward(g, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, mask))

        result[name] = transient(record(bwd))
        keep.clear()
    del x, w, y, g
    return result


def probe_attention(case, backend=None):
    b, hq, hkv, l, d, dtype_name, causal, dropout = case
    dtype = DTYPES[dtype_name]
    # q, k, v as Hugging Face makes them: projections viewed [B, L, H, D] and transposed
    q = torch.randn(b, l, hq, d, device="cuda", dtype=dtype).transpose(1, 2).requires_grad_()
    k = torch.randn(b, l, hkv, d, device="cuda", dtype=dtype).transpose(1, 2).requires_grad_()
    v = torch.randn(b, l, hkv, d, device="cuda", dtype=dtype).transpose(1, 2).requires_grad_()
    out = []

    def fwd():
        if backend is None:
            out.append(F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal, enable_gqa=hq != hkv))
            return
        from torch.nn.attention import SDPBackend, sdpa_kernel

        with sdpa_kernel(getattr(SDPBackend, backend)):
            out.append(F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=causal, enable_gqa=hq != hkv))

    forward_events = record(fwd)
    o = out[0]
    grad = torch.randn(b, l, hq, d, device="cuda", dtype=dtype).transpose(1, 2)

    def bwd():
        o.backward(grad)

    backward_events = record(bwd)
    grad_fn = type(o.grad_fn).__name__ if o.grad_fn is not None else None
    return {
        "case": {"batch": b, "heads": hq, "kv_heads": hkv, "seq": l, "head_dim": d, "dtype": dtype_name, "causal": causal, "dropout": dropout},
        "backend": backend or "default",
        "grad_fn": grad_fn,
        "forward_allocs": [s for a, s, _ in forward_events if a == "alloc"],
        "forward_transient": transient(forward_events),
        "backward_allocs": [s for a, s, _ in backward_events if a == "alloc"],
        "backward_transient": transient(backward_events),
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,2,4,8,12,16,24,32,48,64,80,96,112,128,160,192,224,256", help="a list, or a range like 1-256")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help="which of float32,float16,bfloat16")
    ap.add_argument("--no-attention", action="store_true")
    ap.add_argument("--no-conv", action="store_true")
    ap.add_argument("--grid", default="torchvision", choices=sorted(GRIDS), help="which convolutions")
    ap.add_argument("--attention-backends", default="", help="also force these SDPBackend names, e.g. FLASH_ATTENTION,EFFICIENT_ATTENTION,MATH")
    ap.add_argument("--time-budget", type=float, default=480)
    args = ap.parse_args()
    start = time.time()
    if "-" in args.batches:
        lo, hi = (int(x) for x in args.batches.split("-"))
        batches = list(range(lo, hi + 1))
    else:
        batches = [int(b) for b in args.batches.split(",")]
    dtypes = {name: DTYPES[name] for name in args.dtypes.split(",")}
    props = torch.cuda.get_device_properties(0)
    data = {
        "format": "memplan.workspaces",
        "version": 1,
        "gpu": torch.cuda.get_device_name(),
        "compute_capability": list(torch.cuda.get_device_capability()),
        "multi_processor_count": props.multi_processor_count,
        "torch": torch.__version__,
        "cudnn": torch.backends.cudnn.version(),
        "cuda": torch.version.cuda,
        "attention": [],
        "conv": [],
    }
    for backend in [None] + [b for b in args.attention_backends.split(",") if b]:
        cases = ATTENTION + [(b, h, kv, l, d, "float32", c, p) for (b, h, kv, l, d, _, c, p) in ATTENTION[:4]] if backend else ATTENTION
        for case in [] if args.no_attention else cases:
            try:
                data["attention"].append(probe_attention(case, backend))
            except Exception as error:  # a backend may refuse a shape: record why
                data["attention"].append({"case": list(case), "backend": backend, "error": repr(error)[:300]})
            torch.cuda.empty_cache()
    for dtype_name, dtype in dtypes.items():
        for cfg in [] if args.no_conv else GRIDS[args.grid]:
            for batch in batches:
                if time.time() - start > args.time_budget:
                    data["truncated"] = True
                    break
                try:
                    r = probe_conv(cfg, batch, dtype)
                except torch.cuda.OutOfMemoryError:
                    continue
                cin, cout, k, s, p, hw, input_grad = cfg
                data["conv"].append({"in_channels": cin, "out_channels": cout, "kernel": k, "stride": s, "padding": p, "size": hw, "batch": batch, "dtype": dtype_name, **r})
                torch.cuda.empty_cache()
    data["seconds"] = round(time.time() - start, 1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"workspaces-{args.grid}-{'-'.join(dtypes)}.json").write_text(json.dumps(data))
    print(f"{len(data['conv'])} conv probes, {len(data['attention'])} attention probes in {data['seconds']} s")


if __name__ == "__main__":
    main()
