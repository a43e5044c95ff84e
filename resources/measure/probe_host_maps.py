"""Where the CUDA driver's reservations land among the host's own mappings (issue #14: mixtral_4l_amp_bf16_ckpt
reserves 2.85-5.3% more in memplan than on the H100, and its 6th segment lands 10 GiB above its first).

Runs a plan as memplan_measure.py's `plan` command does (from_config, or from_pretrained of a checkpoint saved by
a process of its own; the plan's cap applied), and reads /proc/self/maps: after the model is built, after
torch.cuda.init(), before each tensor `.to("cuda")` moves (its index in the move, bytes, CPU address and shape;
the parameters' names and addresses are listed apart) and after each training step. Each reading is written as the
difference from the one before (mappings added, mappings removed). With the allocator's trace (segment addresses)
this says which host mappings the driver's reservations fell between.

    python3 probe_host_maps.py PLAN.json [PLAN.json ...] --out DIR [--ways config,pretrained] [--steps 3]
    python3 probe_host_maps.py compact DIR > h100_host_maps.json

Writes DIR/<plan>_<way>.json (the readings and tensors) and DIR/<plan>_<way>.pickle (the allocator snapshot).
`compact` keeps the mappings of 8 MiB or more, shared libraries left out, of every run in DIR: the form of
test/fixtures/device/h100_host_maps.json.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _maps() -> set[str]:
    lines = set()
    with open("/proc/self/maps") as file:
        for line in file:
            fields = line.split()
            lines.add(" ".join(fields[:2] + fields[5:6]))  # range, permissions, path
    return lines


class Readings:
    def __init__(self) -> None:
        self.before: set[str] = set()
        self.readings: list[dict] = []

    def read(self, label: str, **facts) -> None:
        now = _maps()
        self.readings.append({"label": label, **facts, "added": sorted(now - self.before),
                              "removed": sorted(self.before - now)})
        self.before = now


def _run(job: dict, directory: str | None) -> None:
    import torch

    import memplan_measure as mm
    from probe_materialize import load_from_pretrained

    if directory is not None:
        load_from_pretrained(directory)

    readings = Readings()
    readings.read("start")
    plan = job["plan"]
    training = mm.resolve_training(plan)
    mm.prepare_child()
    readings.read("prepared")
    workload = mm.build_workload(plan, training)
    readings.read("built")
    tensors = [{"name": n, "bytes": p.numel() * p.element_size(), "ptr": p.data_ptr()}
               for n, p in workload.model.named_parameters()]
    tensors += [{"name": n, "bytes": b.numel() * b.element_size(), "ptr": b.data_ptr(), "buffer": True}
                for n, b in workload.model.named_buffers()]
    torch.cuda.init()
    mm.apply_cap(mm.plan_cap_bytes(plan))
    readings.read("cuda_init")
    mm.start_history(False)
    readings.read("history")

    model = workload.model
    moved = [0]

    def to_cuda(t):
        readings.read("move", index=moved[0], bytes=t.numel() * t.element_size(), ptr=t.data_ptr(),
                      shape=list(t.shape))
        moved[0] += 1
        return t.cuda()

    original_to = model.to

    def instrumented_to(*args, **kwargs):
        if args == ("cuda",) and not kwargs:
            result = model._apply(to_cuda)
            readings.read("moved")
            return result
        return original_to(*args, **kwargs)

    model.to = instrumented_to
    original_zero_grad = torch.optim.Optimizer.zero_grad

    def zero_grad(self, *args, **kwargs):
        original_zero_grad(self, *args, **kwargs)
        readings.read("step_end")

    torch.optim.Optimizer.zero_grad = zero_grad
    record = mm.RunRecord()
    status = "ok"
    try:
        mm.run_training(workload, training, record)
    except torch.OutOfMemoryError as error:
        status = f"oom: {error}"
    out = Path(job["result_path"])
    mm.dump_history(out.with_suffix(".pickle"))
    out.write_text(json.dumps({"status": status, "tensors": tensors, "readings": readings.readings,
                               "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                               "peak_reserved_bytes": torch.cuda.max_memory_reserved()}))


ABOUT = ("Issue 14: /proc/self/maps read while the H100 ran three calibration plans two ways (from_config on the "
         "CPU as memplan_measure.py builds models; from_pretrained of a checkpoint saved by another process, as "
         "users load one), resources/measure/probe_host_maps.py, PyTorch 2.11, transformers 5.17, 2026-11-26, 3 "
         "steps. Each reading: the mappings of 8 MiB or more (shared libraries left out) added and removed since the "
         "one before: after the model is built, after torch.cuda.init(), before each tensor .to('cuda') moves "
         "(index, bytes, CPU address, shape), after the move, after each step. The driver's reservations are the "
         "---p mappings; adjacent ones show merged.")


def _compact(directory: Path) -> str:
    def size(line: str) -> int:
        start, end = line.split()[0].split("-")
        return int(end, 16) - int(start, 16)

    def keep(lines: list[str]) -> list[str]:
        return [line for line in lines if size(line) >= 8 << 20 and ".so" not in line]

    runs = []
    for path in sorted(directory.glob("*.json")):
        run = json.loads(path.read_text())
        readings = [{**{k: v for k, v in r.items() if k not in ("added", "removed")},
                     "added": keep(r["added"]), "removed": keep(r["removed"])} for r in run["readings"]]
        runs.append(f'{json.dumps(path.stem)}: {{"peak_allocated_bytes": {run["peak_allocated_bytes"]}, '
                    f'"peak_reserved_bytes": {run["peak_reserved_bytes"]}, "readings": [\n'
                    + ",\n".join(json.dumps(r) for r in readings) + "\n]}")
    return '{\n"about": ' + json.dumps(ABOUT) + ',\n"runs": {\n' + ",\n".join(runs) + "\n}}\n"


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "compact":
        sys.stdout.write(_compact(Path(sys.argv[2])))
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "_run":
        job = json.loads(sys.argv[2])
        _run(job, sys.argv[3] if len(sys.argv) > 3 else None)
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("plans", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--ways", default="config,pretrained")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import memplan_measure as mm

    failed = False
    for plan_path in args.plans:
        plan = mm.load_plan(plan_path)
        plan["training"] = {**plan["training"], "steps": args.steps}
        with tempfile.TemporaryDirectory() as saved:
            for way in args.ways.split(","):
                case = f"{plan_path.stem}_{way}"
                job = {"plan": plan, "result_path": str(args.out / f"{case}.json")}
                command = [sys.executable, __file__, "_run", json.dumps(job)]
                if way == "pretrained":
                    subprocess.run([sys.executable, str(HERE / "probe_materialize.py"), "_save", str(plan_path),
                                    saved], check=True, env=mm.child_env(None))
                    command.append(saved)
                with open(args.out / f"{case}.log", "w") as log:
                    done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT,
                                          env=mm.child_env(mm.plan_alloc_conf(plan)), timeout=300)
                failed = failed or done.returncode != 0
                print(case, "done" if done.returncode == 0 else f"failed ({done.returncode}): see {case}.log",
                      flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
