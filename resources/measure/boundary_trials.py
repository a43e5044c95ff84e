"""Fresh-process trials around a predicted largest batch, and recorded runs, many at once on one GPU.

    python3 boundary_trials.py CASES.json --out DIR [--budget-gib 74] [--jobs 10] [--time-budget S]

CASES.json: {"searches": [{"name", "plan", "predicted"}], "recordings": [{"name", "plan", "gib"}]}. Each trial is
one training run of `steps` (default 6) in a new Python process (memplan_measure.py's child job, no recording),
under the plan's cap (set_per_process_memory_fraction), so no earlier trial leaves cuBLAS workspaces or cuDNN's
cached plans behind. Capped runs share the GPU: the sum of caps (plus 1 GiB each for the CUDA context) stays under
--budget-gib; an uncapped plan runs alone. The search per case: the predicted batch p, then up (p+1, p+2, p+3,
doubling steps past them) or down from it, bisection, until a fitting batch L has L+1..L+3 failing.
Writes DIR/trials.jsonl (one line per trial) and DIR/recordings/NAME.json + NAME.pickle.gz; with --record-trials
every trial's snapshot too (DIR/work/NAME_bB.pickle.gz), so a boundary that memplan misses can be compared
allocation by allocation without running it again. With --pretrained, a Hugging Face case's base model is saved once
with save_pretrained (uninitialized values: building an 8B model with random values on the CPU takes minutes) and
every trial loads it with from_pretrained before `.to("cuda")`, as users load a checkpoint (Hugging Face models only:
the others are built as always). An autocast fp16 plan's checkpoint holds initialized values: with uninitialized
ones the loss is not finite, GradScaler skips every step and the optimizer's state never appears (measured on the
H100: TinyLlama 4-layer and GPT-2 small skipped all 6 steps, and batches fit that an updating run does not).
"""
import argparse
import copy
import gzip
import json
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import memplan_measure as mm  # noqa: E402

GIB = 1 << 30
PROBE = Path(__file__).resolve().parent / "probe_materialize.py"


class Budget:
    def __init__(self, total):
        self.total, self.used, self.cv = total, 0.0, threading.Condition()

    def take(self, amount):
        amount = min(amount, self.total)
        with self.cv:
            while self.used + amount > self.total:
                self.cv.wait()
            self.used += amount
        return amount

    def give(self, amount):
        with self.cv:
            self.used -= amount
            self.cv.notify_all()


def weight(plan, gib=None):
    if gib is not None:
        return gib
    cap = mm.plan_cap_bytes(plan)
    return cap / GIB + 1.0 if cap else float("inf")


def run_job(name, plan, out_dir, record, budget, gib=None, timeout=300, pretrained=None):
    w = budget.take(weight(plan, gib))
    try:
        job = {"job": "train", "kind": "boundary", "name": name, "plan": plan,
               "result_path": str(out_dir / f"{name}.json"), "record": record, "stacks": False,
               "meta": {"materialized": "pretrained"} if pretrained else {}}
        # --pretrained: the model loaded from its saved checkpoint (probe_materialize.py's `_train`), as users load it
        command = [sys.executable, str(PROBE), "_train", json.dumps(job), str(pretrained)] if pretrained else None
        outcome = mm.run_child(job, mm.plan_alloc_conf(plan), out_dir / f"{name}.log", timeout, command)
    finally:
        budget.give(w)
    if record:
        gzip_snapshot(out_dir / f"{name}.pickle")
    return outcome


def gzip_snapshot(pickle_path):
    if pickle_path.exists():
        with open(pickle_path, "rb") as src, gzip.open(str(pickle_path) + ".gz", "wb") as dst:
            shutil.copyfileobj(src, dst)
        pickle_path.unlink()


def summary(batch, outcome):
    r = outcome.result or {}
    stats = r.get("memory_stats") or {}
    steps = r.get("steps") or []
    return {
        "batch": batch,
        "status": outcome.status,
        "fits": outcome.status == "ok",
        "peak_allocated_bytes": r.get("peak_allocated_bytes"),
        "peak_reserved_bytes": r.get("peak_reserved_bytes"),
        "step_peaks": [[s.get("peak_allocated_bytes"), s.get("peak_reserved_bytes")] for s in steps if "memory_stats" in s],
        "failed_in_step": len(steps) if outcome.status == "oom" else None,
        "skipped_steps": [s["step"] for s in steps if s.get("skipped")],
        "num_alloc_retries": stats.get("num_alloc_retries"),
        "num_ooms": stats.get("num_ooms"),
        "oom_message": (r.get("oom_message") or "")[:220] or None,
        "error": (r.get("error") or {}).get("message") if isinstance(r.get("error"), dict) else None,
        "seconds": round(outcome.seconds, 1),
    }


def search(case, args, budget, sink, deadline):
    name, plan, p = case["name"], case["plan"], int(case["predicted"])
    work = args.out / "work"
    known = {}
    pretrained = None
    if args.pretrained and "hf_config" in plan["model"]:
        # The base model saved once (probe_materialize.py's `_save`), each trial loading it; uninitialized values
        # (`--empty`: fast for large models) unless GradScaler would see them (see above)
        pretrained = work / f"{name}_checkpoint"
        plan_file = work / f"{name}_plan.json"
        plan_file.write_text(json.dumps(plan))
        empty = [] if plan["training"].get("precision") == "amp_fp16" else ["--empty"]
        subprocess.run([sys.executable, str(PROBE), "_save", str(plan_file), str(pretrained), *empty], check=True,
                       env=mm.child_env(None), stdout=subprocess.DEVNULL)

    def fits(b):
        if b < 1:
            return True
        if b in known:
            return known[b]
        if time.monotonic() > deadline or len(known) >= args.max_trials:
            raise TimeoutError
        trial = copy.deepcopy(plan)
        trial["training"]["batch_size"] = b
        trial["training"]["steps"] = args.steps
        outcome = run_job(f"{name}_b{b}", trial, work, args.record_trials, budget, timeout=args.trial_timeout,
                          pretrained=pretrained)
        s = summary(b, outcome)
        known[b] = s["fits"]
        sink({"case": name, "predicted": p, **s})
        return known[b]

    try:
        if fits(p):
            lo, step = p, 1
            while True:
                up = [b for b in range(lo + 1, lo + 4)]
                fitting = [b for b in up if fits(b)]
                if not fitting:
                    break
                lo = max(fitting)
                # far off: double past the three
                step = 4
                while fits(lo + step):
                    lo += step
                    step *= 2
                hi = lo + step
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    if fits(mid):
                        lo = mid
                    else:
                        hi = mid
        else:
            hi, step = p, 1
            while not fits(p - step):
                hi = p - step
                step *= 2
            lo = p - step
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fits(mid):
                    lo = mid
                else:
                    hi = mid
            while True:
                fitting = [b for b in range(lo + 1, lo + 4) if fits(b)]
                if not fitting:
                    break
                lo = max(fitting)
        sink({"case": name, "predicted": p, "largest": lo, "done": True})
    except TimeoutError:
        sink({"case": name, "predicted": p, "done": False, "known": known})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("cases", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-gib", type=float, default=74)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--max-trials", type=int, default=14)
    parser.add_argument("--time-budget", type=float, default=540)
    parser.add_argument("--trial-timeout", type=float, default=300, help="seconds one trial may run")
    parser.add_argument("--record-trials", action="store_true", help="record every trial's memory snapshot")
    parser.add_argument("--pretrained", action="store_true",
                        help="each search's trials load its base model with from_pretrained from a checkpoint saved once")
    args = parser.parse_args()
    cases = json.loads(args.cases.read_text())
    (args.out / "work").mkdir(parents=True, exist_ok=True)
    (args.out / "recordings").mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.time_budget
    budget = Budget(args.budget_gib)
    lock = threading.Lock()
    log = open(args.out / "trials.jsonl", "a")

    def sink(entry):
        with lock:
            log.write(json.dumps(entry) + "\n")
            log.flush()
            print(json.dumps(entry)[:300], flush=True)

    def record(rec):
        out = args.out / "recordings"
        outcome = run_job(rec["name"], rec["plan"], out, True, budget, rec.get("gib"), args.trial_timeout)
        sink({"recording": rec["name"], **summary(rec["plan"]["training"]["batch_size"], outcome)})

    capped = [c for c in cases.get("searches", []) if mm.plan_cap_bytes(c["plan"])]
    whole = [c for c in cases.get("searches", []) if not mm.plan_cap_bytes(c["plan"])]
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(record, r) for r in cases.get("recordings", [])]
        futures += [pool.submit(search, c, args, budget, sink, deadline) for c in capped]
        for f in futures:
            f.result()
    for c in whole:
        search(c, args, budget, sink, deadline)


if __name__ == "__main__":
    main()
