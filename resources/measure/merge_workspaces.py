#!/usr/bin/env python3
"""Adds probe_workspaces.py and probe_conv_plans.py measurements to memplan's cuDNN workspace table.

    python3 resources/measure/merge_workspaces.py TABLE.json.gz PROBE.json [PROBE.json ...]

A workspaces probe (workspaces-*.json) gives rows table["convs"]["<in>x<out>k<k>s<s>p<p>@<size>:<dtype>"]["<batch>"]
= [forward, backward_data or null, backward_weight] (exact requested bytes, in order); a plans probe
(conv-plans-*.json) gives rows table["fallbacks"][key]["<batch>"] = per pass [failed, final] (null: the pass was not
measured or found no plan), as engine/ops/conv.ts reads them; in the file (version 2) each convolution's rows are kept as JSON text, which
engine/ops/conv.ts parses the first time a plan looks the convolution up. A probe must come from the GPU, PyTorch and cuDNN
versions the table was measured with; a row already in the table is kept unless the probe measured it differently
(then the merge stops: measurements disagree).
"""
import gzip
import json
import sys


ELEMENT_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2}


def plan_row(c, name):
    """[failed, final] of one pass. failed: the sizes that ran out, each once, in the order first tried (PyTorch tries
    plans of equal workspace one after another; after the first fails with the cache empty, the next of that size
    fails the same way). final: the allocations the pass freed once it ran, less its result (the output, the input's
    or the weight's gradient, which the probe drops), i.e. the workspaces of the plan that ran."""
    e = ELEMENT_BYTES[c["dtype"]]
    ho = (c["size"] + 2 * c["padding"] - c["kernel"]) // c["stride"] + 1
    result = {
        "forward": c["batch"] * c["out_channels"] * ho * ho * e,
        "backward_data": c["batch"] * c["in_channels"] * c["size"] * c["size"] * e,
        "backward_weight": c["out_channels"] * c["in_channels"] * c["kernel"] * c["kernel"] * e,
    }[name]
    failed = list(dict.fromkeys(c[name]["failed"]))
    ran = list(c[name]["ran"])
    if result not in ran:
        sys.exit(f"{c}: {name}'s result ({result} B) is not among the allocations it freed")
    ran.remove(result)
    return [failed, ran]


def main():
    table_path, probes = sys.argv[1], sys.argv[2:]
    with gzip.open(table_path, "rt") as f:
        table = json.load(f)
    for section in ("convs", "fallbacks"):  # version 2 keeps each convolution's rows as JSON text
        table[section] = {k: json.loads(v) if isinstance(v, str) else v for k, v in table[section].items()}
    added = 0

    def put(section, key, batch, row, path):
        nonlocal added
        rows = table[section].setdefault(key, {})
        old = rows.get(str(batch))
        if old is not None and old != row:
            sys.exit(f"{path}: {section} {key} batch {batch}: {row} measured, {old} in the table")
        if old is None:
            added += 1
        rows[str(batch)] = row

    for path in probes:
        probe = json.load(open(path))
        for key in ("gpu", "torch", "cudnn", "cuda"):
            if key in probe and probe[key] != table[key]:
                sys.exit(f"{path}: {key} {probe[key]!r}, the table's is {table[key]!r}")
        plans = "conv" not in probe
        for c in probe["convs"] if plans else probe["conv"]:
            key = f"{c['in_channels']}x{c['out_channels']}k{c['kernel']}s{c['stride']}p{c['padding']}@{c['size']}:{c['dtype']}"
            if plans:
                row = [plan_row(c, name) if name in c and not c[name]["error"] else None for name in ("forward", "backward_data", "backward_weight")]
                put("fallbacks", key, c["batch"], row, path)
            else:
                put("convs", key, c["batch"], [c["forward"], c.get("backward_data"), c["backward_weight"]], path)
    for rows in [*table["convs"].values(), *table["fallbacks"].values()]:
        ordered = dict(sorted(rows.items(), key=lambda kv: int(kv[0])))
        rows.clear()
        rows.update(ordered)
    table["version"] = 2
    for section in ("convs", "fallbacks"):
        table[section] = {k: json.dumps(v, separators=(",", ":")) for k, v in table[section].items()}
    with gzip.GzipFile(table_path, "wb", mtime=0) as f:
        f.write(json.dumps(table, separators=(",", ":")).encode())
    print(f"{added} rows added to {table_path}")


if __name__ == "__main__":
    main()
