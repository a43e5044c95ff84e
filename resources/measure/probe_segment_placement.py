#!/usr/bin/env python3
"""Where the CUDA driver places cudaMalloc'd segments (memplan issue 14, engine/allocator/device-memory.ts).

The caching allocator's best fit breaks ties between equal free blocks by address, so the order the driver gives
segments decides fragmentation. This probe replays, with plain cuMemAlloc/cuMemFree (what cudaMalloc/cudaFree
call) and nothing else in the process, the sequence of segment_alloc/segment_free of every recorded snapshot
under test/fixtures (traces, calibration, boundary-suite), each in a fresh process, and a few hand-made size
sequences with the process's /proc/self/maps before and after each call. A second pass replays the recordings
in a process where PyTorch has started CUDA and made its cuBLAS handle first, as a training run has.

    python3 resources/measure/probe_segment_placement.py --out results/   # about 80 s on the H100
    python3 resources/measure/probe_segment_placement.py compact results/segment_placement.json \
        test/fixtures/device/h100_segment_placement.json

The run writes segment_placement.json: {"environment": {...}, "replays": {name: {"driver": {"addrs": [...],
"maps": [...]}, "torch": {"addrs": [...]}}}, "micro": {name: {"ops": [...], "driver": ..., "torch": ...}}};
addresses in the order of the sequence's segment_alloc events (null where cuMemAlloc failed), maps as the
changes to /proc/self/maps after each call. `compact` keeps the plain-driver addresses in MiB from the base of
the CUDA context's own reservation (the fixture test/engine/allocator/cuda-driver-placement.test.ts reads).
"""
import argparse
import ctypes
import glob
import gzip
import json
import os
import pickle
import subprocess
import sys
import time

MB = 1 << 20
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sequences():
    """{name: ops}: ops are [size] for a segment_alloc and [-(i+1)] to free the i-th alloc."""
    out = {}
    for sub in ('test/fixtures/traces', 'test/fixtures/calibration', 'test/fixtures/boundary-suite/recordings'):
        for path in sorted(glob.glob(os.path.join(ROOT, sub, '*.pickle.gz'))):
            with gzip.open(path) as f:
                snap = pickle.load(f)
            trace = next((t for t in snap['device_traces'] if t), [])
            ops, live, n = [], {}, 0
            for e in trace:
                if e['action'] == 'segment_alloc':
                    live[e['addr']] = n
                    ops.append([e['size']])
                    n += 1
                elif e['action'] == 'segment_free' and e['addr'] in live:
                    ops.append([-(live.pop(e['addr']) + 1)])
            if n:
                out[sub.split('/')[-1] + '/' + os.path.basename(path)[: -len('.pickle.gz')]] = ops
    return out


def micro():
    m = {}
    m['small_2m_x40'] = [[2 * MB]] * 40
    m['mid_20m_x20'] = [[20 * MB]] * 20
    m['ascending_2_to_128m'] = [[k * 2 * MB] for k in range(1, 65)]
    m['descending_128_to_2m'] = [[k * 2 * MB] for k in range(64, 0, -1)]
    m['big_sizes'] = [[s * MB] for s in [32] * 4 + [64] * 3 + [112] * 3 + [126] * 3 + [250] * 3 + [502] * 2 + [1024] * 2 + [2048, 4096]]
    m['mixed'] = [[s * MB] for s in [20, 2, 32, 112, 224, 2, 126, 250, 56, 2, 12, 14, 38] * 4]
    m['interleave_2_20'] = [[s * MB] for s in [2, 20] * 12]
    m['big_first'] = [[s * MB] for s in [4096, 2, 2, 2, 20, 20, 20, 112, 112]]
    ops = [[64 * MB]] * 10 + [[-4], [-6], [-7]] + [[32 * MB], [64 * MB], [128 * MB], [2 * MB], [2 * MB]]
    ops += [[-(i + 1)] for i in range(15) if i not in (3, 5, 6)] + [[64 * MB]] * 3
    m['reuse_64m'] = ops
    ops = [[2 * MB]] * 40 + [[-(i + 1)] for i in range(0, 40, 2)] + [[2 * MB]] * 5 + [[4 * MB]] * 2 + [[20 * MB]]
    m['reuse_2m'] = ops
    ops = [[20 * MB]] * 8 + [[-(i + 1)] for i in range(8)] + [[20 * MB]] * 4 + [[40 * MB], [8 * MB], [6 * MB]]
    m['reuse_all_freed'] = ops
    ops = [[s * MB] for s in [38, 20, 20, 98, 124, 98, 26, 50, 50, 50, 50, 38, 2, 14, 26, 26, 20, 20, 12, 12]]
    m['resnet_like'] = ops
    return m


class Driver:
    def __init__(self):
        self.cu = ctypes.CDLL('libcuda.so.1')
        self.check(self.cu.cuInit(0), 'cuInit')
        dev = ctypes.c_int()
        self.check(self.cu.cuDeviceGet(ctypes.byref(dev), 0), 'cuDeviceGet')
        ctx = ctypes.c_void_p()
        self.check(self.cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), 'cuDevicePrimaryCtxRetain')
        self.check(self.cu.cuCtxSetCurrent(ctx), 'cuCtxSetCurrent')
        self.cu.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        self.cu.cuMemFree_v2.argtypes = [ctypes.c_uint64]

    @staticmethod
    def check(rc, what):
        if rc != 0:
            raise RuntimeError(f'{what} failed: {rc}')

    def malloc(self, size):
        p = ctypes.c_uint64()
        rc = self.cu.cuMemAlloc_v2(ctypes.byref(p), size)
        return p.value if rc == 0 else None

    def free(self, p):
        self.cu.cuMemFree_v2(p)


def read_maps():
    out = set()
    with open('/proc/self/maps') as f:
        for line in f:
            parts = line.split()
            out.add(' '.join(parts[:2] + parts[5:6]))
    return out


def child(mode, ops, want_maps):
    if mode == 'torch':
        import torch
        torch.cuda.init()
        torch.cuda.current_blas_handle()
        # a cuBLAS handle and one kernel launch, as a training process has before its first segment
        torch.cuda.synchronize()
    drv = Driver()
    addrs, maps_log, ptrs = [], [], []
    before = read_maps() if want_maps else None
    if want_maps:
        maps_log.append({'initial': sorted(before)})
    for op in ops:
        if op[0] > 0:
            p = drv.malloc(op[0])
            addrs.append(p)
            ptrs.append(p)
        else:
            p = ptrs[-op[0] - 1]
            if p is not None:
                drv.free(p)
        if want_maps:
            now = read_maps()
            maps_log.append({'added': sorted(now - before), 'removed': sorted(before - now)})
            before = now
    return {'addrs': addrs, 'maps': maps_log}


def peak_bytes(ops):
    live, sizes, peak = 0, [], 0
    for op in ops:
        if op[0] > 0:
            sizes.append(op[0])
            live += op[0]
        else:
            live -= sizes[-op[0] - 1]
        peak = max(peak, live)
    return peak


def run_all(jobs, budget_bytes, parallel):
    """jobs: list of (key, mode, ops, want_maps). Runs children with at most `parallel` at once and their peaks
    summing to at most budget_bytes."""
    results, running, pending = {}, [], list(jobs)
    while pending or running:
        used = sum(j[4] for j in running)
        started = False
        for job in list(pending):
            pk = min(peak_bytes(job[2]), budget_bytes)
            if len(running) < parallel and used + pk <= budget_bytes:
                pending.remove(job)
                proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), '_child', job[1], '1' if job[3] else '0'],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                proc.stdin.write(json.dumps(job[2]))
                proc.stdin.close()
                running.append((job[0], job[1], proc, time.time(), pk))
                used += pk
                started = True
        for r in list(running):
            if r[2].poll() is not None:
                running.remove(r)
                out = r[2].stdout.read()
                err = r[2].stderr.read()
                try:
                    results[(r[0], r[1])] = json.loads(out)
                except Exception:
                    results[(r[0], r[1])] = {'error': err[-2000:]}
                print(f'{r[1]:6s} {r[0]:60s} {time.time() - r[3]:.1f}s {"ERR " + err[-300:] if "error" in results[(r[0], r[1])] else ""}', flush=True)
        if not started:
            time.sleep(0.05)
    return results


def context_range_base(maps):
    """The CUDA context's own reservation: the 512-530 MiB PROT_NONE mapping cuInit leaves (see the fixture)."""
    for line in maps[0]['initial']:
        if not line.endswith('---p'):
            continue
        lo, hi = (int(x, 16) for x in line.split()[0].split('-'))
        if 500 * MB <= hi - lo <= 530 * MB:
            return lo
    raise ValueError('no context range in /proc/self/maps')


def compact(raw_path, fixture_path):
    with open(raw_path) as f:
        raw = json.load(f)
    out = {
        'format': 'memplan.segment_placement',
        'measured_with': 'resources/measure/probe_segment_placement.py',
        'environment': raw['environment'],
        'note': "Addresses in MiB from the base of the CUDA context's own address reservation (the 512 MiB PROT_NONE "
                'mapping cuInit leaves in /proc/self/maps), one per segment_alloc of the sequence, in order; null where '
                'cuMemAlloc failed. Replays: the segment_alloc/segment_free sequence of each recording under '
                'test/fixtures, with plain cuMemAlloc/cuMemFree in a fresh process.',
        'replays': {},
        'micro': {},
    }

    def rel(run):
        base = context_range_base(run['maps'])
        return [None if a is None else (a - base) // MB for a in run['addrs']]

    for k, v in sorted(raw['replays'].items()):
        out['replays'][k] = rel(v['driver'])
    for k, v in sorted(raw['micro'].items()):
        out['micro'][k] = {'ops': [[o[0] // MB] if o[0] > 0 else o for o in v['ops']], 'addrs': rel(v['driver'])}
    with open(fixture_path, 'w') as f:
        f.write(json.dumps(out, separators=(',', ':')) + '\n')


def main():
    if len(sys.argv) > 1 and sys.argv[1] == 'compact':
        compact(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) > 1 and sys.argv[1] == '_child':
        ops = json.loads(sys.stdin.read())
        print(json.dumps(child(sys.argv[2], ops, sys.argv[3] == '1')))
        return
    ap = argparse.ArgumentParser()
    ap.add_argument('--out', required=True)
    ap.add_argument('--parallel', type=int, default=8)
    ap.add_argument('--budget-gib', type=float, default=64)
    ap.add_argument('--skip-torch', action='store_true')
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    seqs = sequences()
    mic = micro()
    jobs = [(k, 'driver', ops, True) for k, ops in mic.items()]
    jobs += [(k, 'driver', ops, True) for k, ops in seqs.items()]
    if not args.skip_torch:
        jobs += [(k, 'torch', ops, False) for k, ops in seqs.items()]
        jobs += [(k, 'torch', ops, False) for k, ops in mic.items()]
    t0 = time.time()
    res = run_all(jobs, int(args.budget_gib * (1 << 30)), args.parallel)
    env = {}
    try:
        import torch
        env = {'torch': torch.__version__, 'cuda': torch.version.cuda, 'device': torch.cuda.get_device_name(0)}
        drv_ver = ctypes.c_int()
        ctypes.CDLL('libcuda.so.1').cuDriverGetVersion(ctypes.byref(drv_ver))
        env['driver_api_version'] = drv_ver.value
        env['nvidia_smi'] = subprocess.run(['nvidia-smi', '--query-gpu=driver_version,name', '--format=csv,noheader'],
                                           capture_output=True, text=True).stdout.strip()
        env['kernel'] = os.uname().release
    except Exception as e:  # noqa: BLE001
        env['error'] = str(e)
    out = {'environment': env, 'seconds': round(time.time() - t0, 1), 'replays': {}, 'micro': {}}
    for (k, mode), r in res.items():
        if k in mic:
            out['micro'].setdefault(k, {'ops': mic[k]})[mode] = r
        else:
            out['replays'].setdefault(k, {})[mode] = r
    with open(os.path.join(args.out, 'segment_placement.json'), 'w') as f:
        json.dump(out, f)
    print('done', out['seconds'], 's', env)


if __name__ == '__main__':
    main()
