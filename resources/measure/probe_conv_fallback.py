#!/usr/bin/env python3
"""What cuDNN convolutions do when their workspace does not fit: runs a few convolutions under a memory cap that
leaves room for the output and part of the usual workspace, and records the allocator trace (each failed plan is an
`oom` entry; the plan that runs allocates its own, smaller workspace). Usage: probe_conv_fallback.py OUT_DIR."""
import json, torch, torch.nn.functional as F, sys
from pathlib import Path
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
total = torch.cuda.get_device_properties(0).total_memory
def record(fn):
    torch.cuda.synchronize()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=100000)
    err = None
    try:
        fn()
    except Exception as e:
        err = repr(e)[:200]
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    tr = snap["device_traces"][0] if snap["device_traces"] else []
    return [(e["action"], e["size"]) for e in tr if e["action"] in ("alloc", "free_completed", "oom", "segment_free", "segment_alloc")], err
cfgs = [(64,64,3,1,1,56,64,torch.bfloat16),(256,512,1,2,0,56,64,torch.bfloat16),(128,128,3,1,1,28,96,torch.float32),(3,64,7,2,3,224,64,torch.float16),(64,64,1,1,0,56,128,torch.bfloat16),(512,512,3,1,1,7,128,torch.float16)]
res = []
for cin,cout,k,s,p,hw,B,dt in cfgs:
    torch.cuda.set_per_process_memory_fraction(1.0)
    torch.cuda.empty_cache()
    x = torch.randn(B,cin,hw,hw,device="cuda",dtype=dt); w = torch.randn(cout,cin,k,k,device="cuda",dtype=dt)
    free_ev, _ = record(lambda: F.conv2d(x,w,None,s,p))
    y = F.conv2d(x,w,None,s,p); g = torch.randn_like(y); ob = y.numel()*y.element_size(); del y
    bw_free, _ = record(lambda: torch.ops.aten.convolution_backward(g,x,w,None,[s,s],[p,p],[1,1],False,[0,0],1,[False,True,False]))
    entry = {"cfg":[cin,cout,k,s,p,hw,B,str(dt)],"free_forward":free_ev,"free_bw":bw_free,"capped":[]}
    ws = max([sz for a,sz in free_ev if a=="alloc"][1:] or [0])
    for frac in (0.5, 0.1):
        torch.cuda.empty_cache()
        cap = torch.cuda.memory_reserved() + ob + int(ws*frac) + (4<<20)
        torch.cuda.set_per_process_memory_fraction(min(1.0, cap/total))
        ev, err = record(lambda: F.conv2d(x,w,None,s,p))
        entry["capped"].append({"frac":frac,"cap":cap,"events":ev,"error":err})
    torch.cuda.set_per_process_memory_fraction(1.0)
    res.append(entry); del x, w, g; torch.cuda.empty_cache()
(out/"capped.json").write_text(json.dumps(res))
print("ok", len(res))
