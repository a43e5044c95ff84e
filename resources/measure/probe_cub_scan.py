"""CUB's temporary storage for torch.cumsum over one row.

When the scanned dimension is the whole tensor (one row), ATen's `scan_dim` (ScanUtils.cuh) calls
`at::cuda::cub::inclusive_scan` with `std::plus`, whose temporary storage goes through the caching allocator
(`CUB_WRAPPER`); other shapes run PyTorch's own scan kernels, which ask for nothing. memplan's
`inclusiveScanTempBytes` (engine/ops/cub.ts) gives that size; this records it on a GPU.

    python3 probe_cub_scan.py > h100_cub_scan.json

For each case, the allocations of `torch.cumsum(x, dim=-1)` on a tensor of ones already on the GPU, in order.
Integer inputs scan in int64 (cumsum's default for integers: an int32 input is converted first, its copy the first
allocation); the result comes next and CUB's storage last. `int64_2rows` is a [2, n] tensor (no CUB storage).
"""
import json

import torch


def main() -> None:
    torch.cuda.init()
    cases = [("int64", n) for n in (1024, 14336, 14337, 16384, 28672, 28673, 65536, 131072)]
    cases += [("int32", n) for n in (8, 30720, 30721, 61440, 61441)] + [("int64_2rows", 16384)]
    out = []
    for dtype, n in cases:
        shape = (2, n) if dtype == "int64_2rows" else (1, n) if dtype == "int64" else (n,)
        x = torch.ones(shape, dtype=torch.int32 if dtype == "int32" else torch.int64, device="cuda")
        torch.cuda.synchronize()
        torch.cuda.memory._record_memory_history(max_entries=1000)
        y = torch.cumsum(x, dim=-1)
        torch.cuda.synchronize()
        snapshot = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(enabled=None)
        out.append({"dtype": dtype, "n": n, "allocs": [e["size"] for e in snapshot["device_traces"][0] if e["action"] == "alloc"]})
        del x, y
        torch.cuda.empty_cache()
    print(json.dumps({"about": __doc__.strip().split("\n\n")[0], "torch": torch.__version__, "device": torch.cuda.get_device_name(), "cases": out}, indent=1))


if __name__ == "__main__":
    main()
