"""Which modules PEFT adapts for a plan's `training.lora.target_modules`, and what trains (issue 14).

    python3 probe_lora_targets.py CASES.json --out lora_targets.json

CASES.json: {"cases": [{"name": ..., "plan": <a memplan plan>, "modules_only": false}]} (modules_only: only
named_modules(), without PEFT). Each plan's model is built on the CPU as
memplan_measure.py builds it for a recording (from_config in the plan's dtype, gradient checkpointing, then
`peft.get_peft_model(model, LoraConfig(...))` with the task type of its head), and the script writes, per case:
PEFT's resolved `target_modules` (what "all-linear" or a regular expression became), every parameter's name, shape,
dtype and requires_grad as `named_parameters()` gives them, or the error PEFT raised; and the model's
`named_modules()` before PEFT (name, class, how many parameters and buffers of its own). Nothing runs on the GPU.
test/fixtures/device/h100_lora_targets.json holds what it wrote on the GPU machine (transformers 5.17, PEFT 0.21),
and test/engine/models/lora-targets.test.ts checks memplan's parameters against it.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memplan_measure as mm  # noqa: E402


def base_modules(plan: dict) -> list:
    """`named_modules()` of the plan's model before PEFT wraps it: every module target_modules can match."""
    plain = {**plan, "training": {k: v for k, v in plan["training"].items() if k != "lora"}}
    model = mm.build_workload(plain, mm.resolve_training(plain)).model
    return [[name, type(module).__name__, sum(1 for _ in module.parameters(recurse=False)) + sum(1 for _ in module.buffers(recurse=False))]
            for name, module in model.named_modules() if name]


_modules_of_model: dict[str, list] = {}


def modules_of(plan: dict) -> list:
    """`base_modules`, once for each model description."""
    key = json.dumps(plan["model"], sort_keys=True)
    if key not in _modules_of_model:
        _modules_of_model[key] = base_modules(plan)
    return _modules_of_model[key]


def probe(plan: dict, with_peft: bool = True) -> dict:
    training = mm.resolve_training(plan)
    modules = modules_of(plan)
    if not with_peft:
        return {"modules": modules}
    try:
        workload = mm.build_workload(plan, training)
    except Exception as error:  # PEFT's refusals (ValueError, TypeError, ...) are what is measured
        return {"error": f"{type(error).__name__}: {error}", "modules": modules}
    model = workload.model
    config = getattr(model, "peft_config", {}).get("default")
    targets = getattr(config, "target_modules", None)
    saved = getattr(config, "modules_to_save", None)
    return {
        "peft_class": type(model).__name__,
        "resolved_target_modules": sorted(targets) if isinstance(targets, (set, list)) else targets,
        "modules_to_save": sorted(saved) if isinstance(saved, (set, list)) else saved,
        "parameters": [[name, list(p.shape), str(p.dtype).removeprefix("torch."), p.requires_grad]
                       for name, p in model.named_parameters()],
        "modules": modules,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    import peft
    import torch
    import transformers

    cases = json.loads(args.cases.read_text())["cases"]
    results = []
    for case in cases:
        peft_too = not case.get("modules_only", False)
        result = {"name": case["name"], "plan": case["plan"], **probe(case["plan"], peft_too)}
        print(case["name"], result.get("error") or (f"{sum(1 for p in result['parameters'] if p[3])} trainable tensors"
                                                    if peft_too else f"{len(result['modules'])} modules"), flush=True)
        results.append(result)
        write(args.out, results, torch, transformers, peft)
    return 0


def write(out: Path, results: list, torch, transformers, peft) -> None:
    """The results so far (written after each case: a run cut short keeps what it measured)."""
    out.write_text(json.dumps({
        "about": "PEFT's get_peft_model on each plan's model, built on the CPU as memplan_measure.py builds it "
                 "(resources/measure/probe_lora_targets.py): the resolved target_modules and named_parameters().",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
        "cases": results,
    }, indent=1))


if __name__ == "__main__":
    sys.exit(main())
