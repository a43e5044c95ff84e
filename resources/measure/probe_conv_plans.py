#!/usr/bin/env python3
"""The cuDNN plans PyTorch tries for a convolution when memory is short (aten/src/ATen/native/cudnn/Conv_v8.cpp
`try_plans`: a plan whose workspace cannot be allocated raises OutOfMemoryError, PyTorch empties the cache and
tries the next one). Each convolution of resources/cudnn-workspaces-*.json runs alone under a memory cap that
leaves room for its output only: the allocator records an `oom` entry for every plan that did not fit, in the
order tried, then the workspace of the plan that ran. Writes DIR/conv-plans.json:

    python3 resources/measure/probe_conv_plans.py --out DIR [--batches 16,32,64,96,128,192,256]
"""
import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from probe_workspaces import DTYPES, GRIDS

MiB = 1 << 20


def record(fn):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=100000)
    error = None
    try:
        fn()
    except Exception as e:  # a convolution may find no plan at all
        error = repr(e)[:200]
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    trace = snap["device_traces"][0] if snap["device_traces"] else []
    return [(e["action"], e["size"], e.get("addr")) for e in trace], error


def plans(events):
    """Sizes that failed (`oom`), in order, and the workspaces of the plan that ran (allocated and freed)."""
    failed = [size for action, size, _ in events if action == "oom"]
    live, ran = {}, []
    for action, size, addr in events:
        if action == "alloc":
            live[addr] = len(ran)
            ran.append([size, False])
        elif action == "free_completed" and addr in live:
            ran[live.pop(addr)][1] = True
    return failed, [size for size, freed in ran if freed]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="16,32,64,96,128,192,256", help="a list, or a range like 8-256")
    ap.add_argument("--dtypes", default=",".join(DTYPES))
    ap.add_argument("--grid", default="torchvision", choices=sorted(GRIDS))
    ap.add_argument("--time-budget", type=float, default=420)
    args = ap.parse_args()
    start = time.time()
    total = torch.cuda.get_device_properties(0).total_memory
    results = []
    if "-" in args.batches:
        lo, hi, *step = (int(x) for x in args.batches.replace(":", "-").split("-"))
        batches = list(range(lo, hi + 1, step[0] if step else 1))
    else:
        batches = [int(b) for b in args.batches.split(",")]
    for dtype_name in args.dtypes.split(","):
        dtype = DTYPES[dtype_name]
        for cin, cout, k, s, p, hw, input_grad in GRIDS[args.grid]:
            for batch in batches:
                if time.time() - start > args.time_budget:
                    break
                torch.cuda.set_per_process_memory_fraction(1.0)
                torch.cuda.empty_cache()
                try:
                    x = torch.randn(batch, cin, hw, hw, device="cuda", dtype=dtype)
                    w = torch.randn(cout, cin, k, k, device="cuda", dtype=dtype)
                    ho = (hw + 2 * p - k) // s + 1
                    g = torch.randn(batch, cout, ho, ho, device="cuda", dtype=dtype)
                except torch.cuda.OutOfMemoryError:
                    continue
                entry = {"in_channels": cin, "out_channels": cout, "kernel": k, "stride": s, "padding": p, "size": hw, "batch": batch, "dtype": dtype_name}
                passes = {
                    "forward": (lambda: F.conv2d(x, w, None, s, p), g.numel() * g.element_size()),
                    "backward_weight": (lambda: torch.ops.aten.convolution_backward(g, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [False, True, False]), w.numel() * w.element_size()),
                }
                if input_grad:
                    passes["backward_data"] = (lambda: torch.ops.aten.convolution_backward(g, x, w, None, [s, s], [p, p], [1, 1], False, [0, 0], 1, [True, False, False]), x.numel() * x.element_size())
                for name, (fn, out_bytes) in passes.items():
                    torch.cuda.set_per_process_memory_fraction(1.0)
                    torch.cuda.empty_cache()
                    # room for the output's segment as the allocator sizes it (2 MiB small-pool segments up to 1 MiB,
                    # 20 MiB segments up to 10 MiB, else rounded to 2 MiB) and one small segment for tiny workspaces
                    segment = 2 * MiB if out_bytes <= MiB else 20 * MiB if out_bytes < 10 * MiB else -(-out_bytes // (2 * MiB)) * 2 * MiB
                    cap = torch.cuda.memory_reserved() + segment + 2 * MiB
                    torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total))
                    events, error = record(fn)
                    failed, ran = plans(events)
                    entry[name] = {"failed": failed, "ran": ran, "error": error}
                torch.cuda.set_per_process_memory_fraction(1.0)
                results.append(entry)
                del x, w, g
    torch.cuda.set_per_process_memory_fraction(1.0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"conv-plans-{args.grid}-{args.dtypes.replace(',', '-')}.json").write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "convs": results, "seconds": round(time.time() - start, 1)}))
    print(len(results), "convolutions in", round(time.time() - start, 1), "s")


if __name__ == "__main__":
    main()
