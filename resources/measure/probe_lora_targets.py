"""Which modules PEFT adapts for a plan's `training.lora.target_modules`, and what trains (issue 14).

    python3 probe_lora_targets.py CASES.json --out lora_targets.json

CASES.json: {"cases": [{"name": ..., "plan": <a memplan plan>}]}. Each plan's model is built on the CPU as
memplan_measure.py builds it for a recording (from_config in the plan's dtype, gradient checkpointing, then
`peft.get_peft_model(model, LoraConfig(...))` with the task type of its head), and the script writes, per case:
PEFT's resolved `target_modules` (what "all-linear" or a regular expression became), every parameter's name, shape,
dtype and requires_grad as `named_parameters()` gives them, or the error PEFT raised. Nothing runs on the GPU.
test/fixtures/device/h100_lora_targets.json holds what it wrote on the GPU machine (transformers 5.17, PEFT 0.21),
and test/engine/models/lora-targets.test.ts checks memplan's parameters against it.
"""
import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memplan_measure as mm  # noqa: E402


def probe(plan: dict) -> dict:
    training = mm.resolve_training(plan)
    try:
        workload = mm.build_workload(plan, training)
    except Exception as error:  # PEFT's refusals (ValueError, TypeError, ...) are what is measured
        return {"error": f"{type(error).__name__}: {error}"}
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
        result = {"name": case["name"], "plan": case["plan"], **probe(case["plan"])}
        print(case["name"], result.get("error") or f"{sum(1 for p in result['parameters'] if p[3])} trainable tensors",
              flush=True)
        results.append(result)
    args.out.write_text(json.dumps({
        "about": "PEFT's get_peft_model on each plan's model, built on the CPU as memplan_measure.py builds it "
                 "(resources/measure/probe_lora_targets.py): the resolved target_modules and named_parameters().",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
        "cases": results,
    }, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
