#!/usr/bin/env python3
"""Which PYTORCH_CUDA_ALLOC_CONF keys PyTorch accepts, and what per_process_memory_fraction does: each setting in a
process of its own that allocates 1 KiB, then 5 MiB (the segment it reserves), then 60% of the GPU (the fixture test/fixtures/device/h100_alloc_conf_keys.json,
read by test/engine/allocator/config.test.ts). Run on the GPU machine: python3 probe_alloc_keys.py (writes $OUT)."""
import json, os, subprocess, sys
cases = [
  "per_process_memory_fraction:0.5", "per_process_memory_fraction:1.5", "large_segment_size_mb:40", "large_segment_size_mb:11",
  "throw_on_cudamalloc_oom:True", "expandable_segments_reserve:True", "release_lock_on_hipmalloc:True", "pinned_use_hip_host_register:True",
  "backend:cudaMallocAsync", "backend:native", "backend:foo", "expandable_segments:true", "roundup_power2_divisions:0", "roundup_power2_divisions:[>:4]",
  "max_split_size_mb:21", "pinned_num_register_threads:3",
  # an odd large segment with expandable segments: accepted, then (measured) the large
  # pool's first cuMemCreate of an 11 MiB page fails (alloc_60pct)
  "expandable_segments:True,large_segment_size_mb:11",
  # what large_segment_size_mb bounds and rounds: the least max_split_size_mb, fractions, the least value
  "large_segment_size_mb:40,max_split_size_mb:30", "large_segment_size_mb:11,max_split_size_mb:12", "large_segment_size_mb:10",
  "large_segment_size_mb:11.5", "expandable_segments:True,large_segment_size_mb:40",
]
child = r'''
import torch, json, sys
out = {}
try:
    x = torch.empty(1024, device="cuda")
    out["ok"] = True
    # the segment a 5 MiB request gets (large_segment_size for 1-10 MiB requests)
    before = torch.cuda.memory_reserved()
    try:
        z = torch.empty(5 * 2**20, dtype=torch.uint8, device="cuda")
        out["segment_5mib"] = torch.cuda.memory_reserved() - before
        del z
    except Exception as e:
        out["segment_5mib"] = str(e)[:300]
    out["backend"] = torch.cuda.get_allocator_backend()
    try:
        out["fraction"] = torch.cuda.get_per_process_memory_fraction(0)
    except Exception as e:
        out["fraction_err"] = repr(e)[:200]
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        y = torch.empty(int(total * 0.6), dtype=torch.uint8, device="cuda")
        out["alloc_60pct"] = "ok"
        del y
    except Exception as e:
        out["alloc_60pct"] = str(e)[:400]
except Exception as e:
    out["ok"] = False
    out["err"] = str(e)[:500]
print(json.dumps(out))
'''
res = {"torch": subprocess.run([sys.executable, "-c", "import torch;print(torch.__version__)"], capture_output=True, text=True).stdout.strip()}
for c in cases:
    env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=c)
    p = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, env=env, timeout=120)
    last = (p.stdout.strip().splitlines() or [""])[-1]
    try:
        res[c] = json.loads(last)
    except Exception:
        res[c] = {"ok": False, "stderr": p.stderr[-600:]}
    if p.stderr.strip(): res[c]["warn"] = p.stderr.strip()[-300:]
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
open(os.path.join(os.environ.get("OUT", "/tmp"), "alloc_keys.json"), "w").write(json.dumps(res, indent=1))
print(json.dumps(res, indent=1))
