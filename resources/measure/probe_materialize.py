"""Does how a Hugging Face model is materialized change where the CUDA driver puts the allocator's segments?

memplan_measure.py builds Hugging Face models with `from_config(config, dtype=...)` on the CPU, then `.to("cuda")`.
Users load a checkpoint: `from_pretrained(path, dtype=...)`, then `.to("cuda")`. Both give the GPU the same
allocations in the same order, but the host's mappings differ (the CPU copy of the model: anonymous memory built
by from_config, or tensors read from a safetensors file), and with CUDA's unified addressing the driver's address
reservations share the process's address space with them (Note [cudaMalloc placement] in
engine/allocator/device-memory.ts). Where segments land decides the caching allocator's ties between free blocks
of one size, so it can change max_memory_reserved().

    python3 probe_materialize.py PLAN.json [PLAN.json ...] --out DIR --repeats N --steps S

For each plan, N fresh processes each way: `config` (memplan_measure.py's own path) and `pretrained` (the model
saved once with save_pretrained by a process of its own, then each run loads it with from_pretrained). Each run is
memplan_measure.py's `train` job (the standard step, every allocator event recorded): DIR/<plan>_<way>_<i>.json
and .pickle. DIR/summary.json has per run the peak reserved of each step and every segment's address and size in
the order cudaMalloc returned them.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def _save(plan_path: str, directory: str, empty: bool = False) -> None:
    """The base model a checkpoint would hold (no adapters, nothing frozen: the training run adds those), saved
    with save_pretrained. `empty`: built on the meta device and given uninitialized CPU memory (`to_empty`), for
    models whose random initialization on the CPU takes minutes (8B: more than 5); the values do not change what the
    GPU allocates (no shape depends on them), and from_pretrained loads the file as it loads any checkpoint."""
    import torch

    import memplan_measure as mm

    plan = mm.load_plan(Path(plan_path))
    training = {**mm.resolve_training(plan), "lora": None, "freeze": []}
    mm.prepare_child()
    if empty:
        with torch.device("meta"):
            workload = mm.build_workload(plan, training)
        workload.model.to_empty(device="cpu")
    else:
        workload = mm.build_workload(plan, training)
    workload.model.save_pretrained(directory)


def load_from_pretrained(directory: str) -> list[str]:
    """Makes memplan_measure.py's `from_config` load the model saved in `directory` with from_pretrained (the
    same kwargs: dtype, attn_implementation), as users load a checkpoint. Returns the classes loaded so far (the
    caller checks that one was: a model built some other way would not be what the run claims)."""
    import transformers

    loaded: list[str] = []

    def from_pretrained_instead(cls):
        def load(config, **kwargs):
            loaded.append(cls.__name__)
            return cls.from_pretrained(directory, **kwargs)

        return load

    # every Auto class memplan_measure.py builds a Hugging Face model with
    for cls in (transformers.AutoModelForCausalLM, transformers.AutoModelForMaskedLM, transformers.AutoModelForSequenceClassification,
                transformers.AutoModelForTokenClassification):
        cls.from_config = from_pretrained_instead(cls)
    return loaded


def _train(job: dict, directory: str) -> None:
    import memplan_measure as mm

    loaded = load_from_pretrained(directory)
    build = mm.build_workload

    def built_from_checkpoint(plan: dict, training: dict):
        before = len(loaded)
        workload = build(plan, training)
        if "hf_config" in plan["model"] and len(loaded) == before:
            raise RuntimeError(f"the model was not loaded from {directory} with from_pretrained: memplan_measure.py built it another way")
        return workload

    mm.build_workload = built_from_checkpoint
    mm.job_train(job)


def _segments(pickle_path: Path) -> list[list[int]]:
    with open(pickle_path, "rb") as file:
        snapshot = pickle.load(file)
    trace = (snapshot.get("device_traces") or [[]])[0]
    return [[entry["addr"], entry["size"]] for entry in trace if entry["action"] == "segment_alloc"]


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_save":
        _save(sys.argv[2], sys.argv[3], empty="--empty" in sys.argv[4:])
        return 0
    if len(sys.argv) > 1 and sys.argv[1] == "_train":
        _train(json.loads(sys.argv[2]), sys.argv[3])
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("plans", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--ways", default="config,pretrained", help="config, pretrained or both (comma-separated)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import memplan_measure as mm

    summary = []
    for plan_path in args.plans:
        plan = mm.load_plan(plan_path)
        plan["training"] = {**plan["training"], "steps": args.steps}
        name = plan_path.stem
        with tempfile.TemporaryDirectory() as saved:
            subprocess.run([sys.executable, __file__, "_save", str(plan_path), saved], check=True,
                           env=mm.child_env(None))
            for repeat in range(args.repeats):
                for way in args.ways.split(","):
                    case = f"{name}_{way}_{repeat}"
                    result_path = args.out / f"{case}.json"
                    job = {"job": "train", "kind": "calibration", "name": case, "plan": plan,
                           "result_path": str(result_path), "record": True, "stacks": False,
                           "meta": {"materialized": way}}
                    command = (mm.child_command(job) if way == "config"
                               else [sys.executable, __file__, "_train", json.dumps(job), saved])
                    with open(args.out / f"{case}.log", "w") as log:
                        subprocess.run(command, stdout=log, stderr=subprocess.STDOUT,
                                       env=mm.child_env(mm.plan_alloc_conf(plan)), timeout=300)
                    result = json.loads(result_path.read_text())
                    entry = {
                        "case": case, "plan": name, "way": way, "status": result["status"],
                        "peak_allocated_bytes": result.get("peak_allocated_bytes"),
                        "peak_reserved_bytes": result.get("peak_reserved_bytes"),
                        "step_peaks": [[s["memory_stats"].get("allocated_bytes.all.peak"),
                                        s["memory_stats"].get("reserved_bytes.all.peak")]
                                       for s in result["steps"] if "memory_stats" in s],
                        "segments": _segments(result_path.with_suffix(".pickle")),
                    }
                    summary.append(entry)
                    print(case, entry["status"], entry["peak_allocated_bytes"], entry["peak_reserved_bytes"],
                          [p[1] for p in entry["step_peaks"]], flush=True)
                    (args.out / "summary.json").write_text(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
