#!/usr/bin/env python3
"""Measure what PyTorch's CUDA caching allocator does in real training runs, to check memplan's predictions.

memplan predicts the CUDA memory of a PyTorch training run from a plan file (docs/plan-format.md). This script
runs plans on your GPU and records what really happened:

  device      facts about the GPU: CUDA context and library handles, and how much the allocator can reserve
  trace       built-in allocator scenarios (AMP, checkpointing, memory caps, an OOM, allocator settings), each
              with a full allocator snapshot recorded from before the first CUDA allocation
  plan        runs plan files; memory after every phase of every step, the peaks, and a snapshot
  max-batch   the largest micro-batch that fits, found by trial as a user would find it
  all         all of the above for the scenario files shipped beside this script, within a time budget

Each measurement runs in a fresh child process, so the caching allocator starts empty and the allocator settings
(PYTORCH_CUDA_ALLOC_CONF) are read before CUDA starts. The parent process never initialises CUDA, so it holds no
GPU memory while the children run. Needs PyTorch; torchvision or transformers only for plans that use them.
Works offline. See README.md beside this file.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fnmatch
import gc
import importlib.metadata
import json
import math
import os
import pickle
import platform
import queue
import re
import subprocess
import sys
import threading
import time
import traceback
import typing
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

MIB = 1 << 20
GIB = 1 << 30
SCRIPT_PATH = Path(__file__).resolve()
SCENARIO_DIR = SCRIPT_PATH.parent / "scenarios"
RESULT_FORMAT = "memplan.measurement"
# Marks the lines a max-batch worker writes for its parent; everything else on its stdout goes to the log.
MESSAGE_MARK = "@@memplan-measure@@ "
# Large enough that the history ring buffer never wraps in these runs (a wrap would drop the oldest events).
HISTORY_MAX_ENTRIES = 10_000_000
# torch.cuda.memory._dump_snapshot pickles with Python's default protocol, which is 4 up to Python 3.13.
PICKLE_PROTOCOL = 4
ALLOC_CONF_VARIABLES = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
OutOfMemoryError = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)

# ---------------------------------------------------------------------------------------------------------------
# The plan file: a minimal check of docs/plan-format.md, with every default filled in.
# ---------------------------------------------------------------------------------------------------------------

PRECISIONS = ("fp32", "amp_fp16", "amp_bf16", "bf16", "fp16")
OPTIMIZERS = ("sgd", "sgd_momentum", "adam", "adamw")
OPTIMIZER_IMPLS = ("foreach", "fused", "for_loop")
ATTENTIONS = ("sdpa", "eager")
TORCHVISION_MODELS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "vit_b_16", "vit_l_16")
TRAINING_DEFAULTS = {
    "seq_len": 512,
    "image_size": 224,
    "precision": "fp32",
    "optimizer": "adamw",
    "optimizer_impl": "foreach",
    "grad_accumulation_steps": 1,
    "activation_checkpointing": False,
    "attention": "sdpa",
    "steps": 3,
    "lora": None,
    "freeze": [],
}
LORA_KEYS = ("r", "alpha", "target_modules")
LORA_OPTIONAL = ("dropout", "quantization", "modules_to_save", "ensure_weight_tying", "use_dora")
# Layer types of a layer list: required parameters, then optional ones with their defaults.
LAYER_PARAMS: dict[str, tuple[tuple[str, ...], dict]] = {
    "linear": (("in_features", "out_features"), {"bias": True}),
    "conv2d": (("in_channels", "out_channels", "kernel_size"), {"stride": 1, "padding": 0, "bias": True}),
    "batch_norm2d": (("num_features",), {}),
    "layer_norm": (("normalized_shape",), {}),
    "rms_norm": (("normalized_shape",), {}),
    "relu": ((), {}),
    "gelu": ((), {}),
    "silu": ((), {}),
    "tanh": ((), {}),
    "sigmoid": ((), {}),
    "dropout": (("p",), {}),
    "max_pool2d": (("kernel_size",), {"stride": None}),
    "adaptive_avg_pool2d": (("output_size",), {}),
    "flatten": ((), {}),
    "embedding": (("num_embeddings", "embedding_dim"), {}),
    "self_attention": (("embed_dim", "num_heads"), {}),
    "residual": (("layers",), {}),
    "repeat": (("count", "layers"), {}),
}
SHAPE_PRESERVING_LAYERS = ("relu", "gelu", "silu", "tanh", "sigmoid", "dropout")


class PlanError(ValueError):
    """A plan this script cannot run. The message starts with the field that is wrong."""

    def __init__(self, where: str, problem: str):
        super().__init__(f"{where}: {problem}" if where else problem)


def _check_keys(obj, where: str, required=(), optional=()) -> None:
    """Requires `obj` to be an object with all `required` keys and no keys outside `required` and `optional`."""
    if not isinstance(obj, dict):
        raise PlanError(where, f"expected an object, got {type(obj).__name__}")
    missing = [key for key in required if key not in obj]
    if missing:
        raise PlanError(where, f"missing {', '.join(missing)}")
    unknown = sorted(set(obj) - set(required) - set(optional))
    if unknown:
        raise PlanError(where, f"unknown key(s) {', '.join(unknown)}")


def _positive_int(value, where: str) -> int:
    if type(value) is not int or value <= 0:
        raise PlanError(where, f"expected a positive integer, got {value!r}")
    return value


def _choice(value, choices, where: str):
    if value not in choices:
        raise PlanError(where, f"expected one of {', '.join(map(str, choices))}, got {value!r}")
    return value


def _int_pair(value, where: str) -> tuple[int, int]:
    """A kernel size, stride, padding or output size: one integer for both sides, or [height, width]."""
    if type(value) is int and value >= 0:
        return value, value
    if isinstance(value, list) and len(value) == 2 and all(type(v) is int and v >= 0 for v in value):
        return value[0], value[1]
    raise PlanError(where, f"expected a non-negative integer or [height, width], got {value!r}")


def resolve_training(plan) -> dict:
    """Checks a whole plan and returns its `training` section with every default filled in.

    `activation_checkpointing` comes back as None, "non_reentrant" or "reentrant".
    """
    _check_keys(plan, "plan", ("format", "version", "model", "training"), ("name", "allocator", "gpu"))
    if plan["format"] != "memplan.plan":
        raise PlanError("format", f'expected "memplan.plan", got {plan["format"]!r}')
    if plan["version"] != 1:
        raise PlanError("version", f"this script reads version 1, got {plan['version']!r}")
    _check_model(plan["model"])
    _check_keys(plan["training"], "training", ("batch_size",), tuple(TRAINING_DEFAULTS))
    training = {**TRAINING_DEFAULTS, **plan["training"]}
    for key in ("batch_size", "seq_len", "image_size", "grad_accumulation_steps", "steps"):
        _positive_int(training[key], f"training.{key}")
    _choice(training["precision"], PRECISIONS, "training.precision")
    _choice(training["optimizer"], OPTIMIZERS, "training.optimizer")
    _choice(training["optimizer_impl"], OPTIMIZER_IMPLS, "training.optimizer_impl")
    _choice(training["attention"], ATTENTIONS, "training.attention")
    checkpointing = training["activation_checkpointing"]
    if checkpointing is False:
        training["activation_checkpointing"] = None
    elif checkpointing is True:
        training["activation_checkpointing"] = "non_reentrant"
    else:
        _choice(checkpointing, ("non_reentrant", "reentrant"), "training.activation_checkpointing")
    _check_fine_tuning(training)
    if "allocator" in plan:
        _check_keys(plan["allocator"], "allocator", ("conf",))
        if not isinstance(plan["allocator"]["conf"], str):
            raise PlanError("allocator.conf", "expected a PYTORCH_CUDA_ALLOC_CONF string")
    if "gpu" in plan:
        gpu = plan["gpu"]
        if isinstance(gpu, dict) and "memory_limit_bytes" in gpu:
            _check_keys(gpu, "gpu", ("memory_limit_bytes",))
            _positive_int(gpu["memory_limit_bytes"], "gpu.memory_limit_bytes")
        else:
            _check_keys(gpu, "gpu", ("name",))
            if not isinstance(gpu["name"], str):
                raise PlanError("gpu.name", "expected a string")
    return training


def _check_fine_tuning(training: dict) -> None:
    """`training.lora` (PEFT's LoraConfig) and `training.freeze` (parameter-name patterns), as docs/plan-format.md."""
    freeze = training["freeze"]
    if not isinstance(freeze, list) or not all(isinstance(p, str) for p in freeze):
        raise PlanError("training.freeze", "expected a list of parameter-name patterns")
    lora = training["lora"]
    if lora is None:
        return
    if not isinstance(lora, dict):
        raise PlanError("training.lora", "expected an object")
    _check_keys(lora, "training.lora", LORA_KEYS, LORA_OPTIONAL)
    _positive_int(lora["r"], "training.lora.r")
    if not isinstance(lora["alpha"], (int, float)) or lora["alpha"] <= 0:
        raise PlanError("training.lora.alpha", "expected a positive number")
    if not isinstance(lora.get("dropout", 0.0), (int, float)) or not 0 <= lora.get("dropout", 0.0) < 1:
        raise PlanError("training.lora.dropout", "expected a probability in [0, 1)")
    targets = lora["target_modules"]
    # PEFT's forms: a list of names (a module's name or its last parts), or one string: "all-linear", else a
    # regular expression its whole name must match
    if isinstance(targets, str) and not targets:
        raise PlanError("training.lora.target_modules", "expected a non-empty string")
    if not isinstance(targets, str) and (not isinstance(targets, list) or not targets
                                         or not all(isinstance(t, str) and t for t in targets)):
        raise PlanError("training.lora.target_modules", 'expected a list of module names, "all-linear" or a regular expression')
    if not isinstance(lora.get("use_dora", False), bool):
        raise PlanError("training.lora.use_dora", "expected true or false")
    if not isinstance(lora.get("ensure_weight_tying", False), bool):
        raise PlanError("training.lora.ensure_weight_tying", "expected true or false")
    saved = lora.get("modules_to_save", [])
    if not isinstance(saved, list) or not all(isinstance(m, str) and m for m in saved):
        raise PlanError("training.lora.modules_to_save", "expected a list of module names")
    if lora.get("quantization", "none") != "none":
        raise PlanError("training.lora.quantization", "4-bit and 8-bit bases need bitsandbytes, which this script does not use")


def _check_model(model) -> None:
    if not isinstance(model, dict):
        raise PlanError("model", "expected an object")
    if "hf_config" in model:
        _check_keys(model, "model", ("hf_config",))
        config = model["hf_config"]
        if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
            raise PlanError("model.hf_config", "expected a config.json object with a model_type")
    elif "torchvision" in model:
        _check_keys(model, "model", ("torchvision",), ("num_classes",))
        _choice(model["torchvision"], TORCHVISION_MODELS, "model.torchvision")
        _positive_int(model.get("num_classes", 1000), "model.num_classes")
    elif "layers" in model:
        _check_keys(model, "model", ("layers",), ("input_features", "input_shape"))
        layer_list_io(model)
    else:
        raise PlanError("model", "expected one of hf_config, torchvision, layers")


def plan_alloc_conf(plan: dict) -> str | None:
    """The PYTORCH_CUDA_ALLOC_CONF string a plan asks for; None for PyTorch's defaults."""
    conf = plan.get("allocator", {}).get("conf")
    return conf or None


def plan_cap_bytes(plan: dict) -> int | None:
    """The memory cap (gpu.memory_limit_bytes) a plan asks for, or None."""
    gpu = plan.get("gpu")
    return gpu.get("memory_limit_bytes") if isinstance(gpu, dict) else None


def load_plan(path: Path) -> dict:
    """Reads and checks one plan file; a PlanError names the file."""
    try:
        plan = json.loads(Path(path).read_text())
        resolve_training(plan)
    except (OSError, json.JSONDecodeError) as error:
        raise PlanError(str(path), str(error)) from None
    except PlanError as error:
        raise PlanError(str(path), str(error)) from None
    return plan


# ---------------------------------------------------------------------------------------------------------------
# Layer lists: shapes (checked before anything runs) and modules.
# ---------------------------------------------------------------------------------------------------------------


def layer_list_io(model: dict) -> tuple[list[int], bool, list[int]]:
    """Returns (per-sample input shape, whether the input is integer token ids, per-sample output shape).

    The input is token ids when the first layer is an embedding. Every layer's parameters and shapes are checked.
    """
    if ("input_features" in model) == ("input_shape" in model):
        raise PlanError("model", "a layer list needs exactly one of input_features, input_shape")
    if "input_features" in model:
        shape = [_positive_int(model["input_features"], "model.input_features")]
    else:
        shape = model["input_shape"]
        if not isinstance(shape, list) or not shape:
            raise PlanError("model.input_shape", "expected a non-empty list of positive integers")
        for i, size in enumerate(shape):
            _positive_int(size, f"model.input_shape[{i}]")
    layers = model["layers"]
    if not isinstance(layers, list) or not layers:
        raise PlanError("model.layers", "expected a non-empty list")
    token_ids = isinstance(layers[0], dict) and layers[0].get("type") == "embedding"
    output, output_is_ids = _layers_output(layers, list(shape), token_ids, "model.layers")
    if output_is_ids or not output:
        raise PlanError("model.layers", f"the output must be float with a class dimension, got shape {output}")
    return list(shape), token_ids, output


def _layers_output(layers, shape: list[int], ids: bool, where: str) -> tuple[list[int], bool]:
    if not isinstance(layers, list) or not layers:
        raise PlanError(where, "expected a non-empty list of layers")
    for i, spec in enumerate(layers):
        shape, ids = _layer_output(spec, shape, ids, f"{where}[{i}]")
    return shape, ids


def _layer_output(spec, shape: list[int], ids: bool, where: str) -> tuple[list[int], bool]:
    """The per-sample output shape of one layer, checking its parameters against the input shape."""
    if not isinstance(spec, dict) or "type" not in spec:
        raise PlanError(where, 'expected a layer object with a "type"')
    kind = _choice(spec["type"], tuple(LAYER_PARAMS), f"{where}.type")
    required, optional = LAYER_PARAMS[kind]
    _check_keys(spec, where, ("type", *required), tuple(optional))
    if ids and kind != "embedding":
        raise PlanError(where, "integer token ids can only go into an embedding")

    def need(condition: bool, problem: str) -> None:
        if not condition:
            raise PlanError(where, f"{problem} (input shape per sample: {shape})")

    if kind == "linear":
        _positive_int(spec["out_features"], f"{where}.out_features")
        need(shape[-1] == spec["in_features"], f"in_features {spec['in_features']} does not match")
        return shape[:-1] + [spec["out_features"]], False
    if kind == "conv2d":
        need(len(shape) == 3 and shape[0] == spec["in_channels"], "conv2d needs [in_channels, height, width]")
        _positive_int(spec["out_channels"], f"{where}.out_channels")
        kernel = _int_pair(spec["kernel_size"], f"{where}.kernel_size")
        stride = _int_pair(spec.get("stride", 1), f"{where}.stride")
        padding = _int_pair(spec.get("padding", 0), f"{where}.padding")
        need(min(kernel) > 0 and min(stride) > 0, "kernel_size and stride must be positive")
        size = [(shape[1 + d] + 2 * padding[d] - kernel[d]) // stride[d] + 1 for d in (0, 1)]
        need(min(size) > 0, "the image is smaller than the kernel")
        return [spec["out_channels"], *size], False
    if kind == "batch_norm2d":
        need(len(shape) == 3 and shape[0] == spec["num_features"], "batch_norm2d needs [num_features, h, w]")
        return shape, False
    if kind in ("layer_norm", "rms_norm"):
        normalized = spec["normalized_shape"]
        normalized = [normalized] if type(normalized) is int else normalized
        need(isinstance(normalized, list) and shape[-len(normalized):] == normalized, "normalized_shape does not match")
        return shape, False
    if kind == "dropout":
        p = spec["p"]
        need(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p < 1, "p must be in [0, 1)")
        return shape, False
    if kind in SHAPE_PRESERVING_LAYERS:
        return shape, False
    if kind == "max_pool2d":
        need(len(shape) == 3, "max_pool2d needs [channels, height, width]")
        kernel = _int_pair(spec["kernel_size"], f"{where}.kernel_size")
        stride = kernel if spec.get("stride") is None else _int_pair(spec["stride"], f"{where}.stride")
        need(min(kernel) > 0 and min(stride) > 0, "kernel_size and stride must be positive")
        size = [(shape[1 + d] - kernel[d]) // stride[d] + 1 for d in (0, 1)]
        need(min(size) > 0, "the image is smaller than the kernel")
        return [shape[0], *size], False
    if kind == "adaptive_avg_pool2d":
        need(len(shape) == 3, "adaptive_avg_pool2d needs [channels, height, width]")
        size = _int_pair(spec["output_size"], f"{where}.output_size")
        need(min(size) > 0, "output_size must be positive")
        return [shape[0], *size], False
    if kind == "flatten":
        return [math.prod(shape)], False
    if kind == "embedding":
        need(ids, "an embedding takes integer token ids: make it the first layer")
        _positive_int(spec["num_embeddings"], f"{where}.num_embeddings")
        return shape + [_positive_int(spec["embedding_dim"], f"{where}.embedding_dim")], False
    if kind == "self_attention":
        embed_dim = _positive_int(spec["embed_dim"], f"{where}.embed_dim")
        heads = _positive_int(spec["num_heads"], f"{where}.num_heads")
        need(len(shape) == 2 and shape[1] == embed_dim, "self_attention needs [seq_len, embed_dim]")
        need(embed_dim % heads == 0, "embed_dim must be divisible by num_heads")
        return shape, False
    if kind == "residual":
        output, _ = _layers_output(spec["layers"], shape, False, f"{where}.layers")
        need(output == shape, f"a residual body must keep the shape, it gives {output}")
        return shape, False
    # repeat
    for _ in range(_positive_int(spec["count"], f"{where}.count")):
        shape, _ = _layers_output(spec["layers"], shape, False, f"{where}.layers")
    return shape, False


class Residual(nn.Module):
    """A plan's `residual` layer: `x + body(x)`."""

    def __init__(self, body: nn.Module):
        super().__init__()
        self.body = body

    def forward(self, x):
        return x + self.body(x)


class Repeat(nn.Module):
    """A plan's `repeat` layer: `count` copies of a body, each with its own parameters."""

    def __init__(self, bodies: list[nn.Module]):
        super().__init__()
        self.bodies = nn.ModuleList(bodies)

    def forward(self, x):
        for body in self.bodies:
            x = body(x)
        return x


class SelfAttention(nn.Module):
    """A plan's `self_attention` layer: `nn.MultiheadAttention(batch_first=True)` called as attn(x, x, x)."""

    def __init__(self, embed_dim: int, num_heads: int):
        super().__init__()
        self.attn = nn.MultiheadAttention(embed_dim, num_heads, batch_first=True)

    def forward(self, x):
        return self.attn(x, x, x, need_weights=False)[0]


class LayerList(nn.Module):
    """A plan's layer list, applied in order.

    With activation checkpointing, each top-level residual and each iteration of a top-level repeat runs under
    torch.utils.checkpoint.checkpoint (docs/plan-format.md).
    """

    def __init__(self, layers: list[nn.Module], checkpointing: str | None):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.checkpointing = checkpointing

    def forward(self, x):
        reentrant = self.checkpointing == "reentrant"
        for layer in self.layers:
            if self.checkpointing and isinstance(layer, Residual):
                x = checkpoint(layer, x, use_reentrant=reentrant)
            elif self.checkpointing and isinstance(layer, Repeat):
                for body in layer.bodies:
                    x = checkpoint(body, x, use_reentrant=reentrant)
            else:
                x = layer(x)
        return x


class Checkpointed(nn.Module):
    """Runs one block of a torchvision model under torch.utils.checkpoint.checkpoint."""

    def __init__(self, block: nn.Module, reentrant: bool):
        super().__init__()
        self.block = block
        self.reentrant = reentrant

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=self.reentrant)


def _tuple_or_int(value):
    return tuple(value) if isinstance(value, list) else value


def build_layer(spec: dict) -> nn.Module:
    """The PyTorch module for one checked layer spec."""
    kind = spec["type"]
    if kind == "linear":
        return nn.Linear(spec["in_features"], spec["out_features"], bias=spec.get("bias", True))
    if kind == "conv2d":
        return nn.Conv2d(
            spec["in_channels"],
            spec["out_channels"],
            _tuple_or_int(spec["kernel_size"]),
            stride=_tuple_or_int(spec.get("stride", 1)),
            padding=_tuple_or_int(spec.get("padding", 0)),
            bias=spec.get("bias", True),
        )
    if kind == "batch_norm2d":
        return nn.BatchNorm2d(spec["num_features"])
    if kind == "layer_norm":
        return nn.LayerNorm(_tuple_or_int(spec["normalized_shape"]))
    if kind == "rms_norm":
        return nn.RMSNorm(_tuple_or_int(spec["normalized_shape"]))
    if kind == "dropout":
        return nn.Dropout(spec["p"])
    if kind == "max_pool2d":
        return nn.MaxPool2d(_tuple_or_int(spec["kernel_size"]), stride=_tuple_or_int(spec.get("stride")))
    if kind == "adaptive_avg_pool2d":
        return nn.AdaptiveAvgPool2d(_tuple_or_int(spec["output_size"]))
    if kind == "flatten":
        return nn.Flatten(1)
    if kind == "embedding":
        return nn.Embedding(spec["num_embeddings"], spec["embedding_dim"])
    if kind == "self_attention":
        return SelfAttention(spec["embed_dim"], spec["num_heads"])
    if kind == "residual":
        return Residual(nn.Sequential(*map(build_layer, spec["layers"])))
    if kind == "repeat":
        return Repeat([nn.Sequential(*map(build_layer, spec["layers"])) for _ in range(spec["count"])])
    activations = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU, "tanh": nn.Tanh, "sigmoid": nn.Sigmoid}
    return activations[kind]()


# ---------------------------------------------------------------------------------------------------------------
# Workloads: the model on the CPU, and how one micro-step creates its inputs and computes its loss.
# ---------------------------------------------------------------------------------------------------------------

PARAM_DTYPES = {
    "fp32": torch.float32,
    "amp_fp16": torch.float32,
    "amp_bf16": torch.float32,
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}
AUTOCAST_DTYPES = {"amp_fp16": torch.float16, "amp_bf16": torch.bfloat16}
LEARNING_RATES = {"sgd": 1e-3, "sgd_momentum": 1e-3, "adam": 1e-4, "adamw": 1e-4}


@dataclasses.dataclass
class Workload:
    """A model built on the CPU in its training dtype, plus the two halves of a micro-step.

    `make_inputs(batch)` creates one micro-batch on the GPU; `loss(model, *inputs)` runs forward and the loss.
    """

    model: nn.Module
    make_inputs: Callable[[int], tuple]
    loss: Callable[..., torch.Tensor]
    facts: dict


def build_workload(plan: dict, training: dict) -> Workload:
    """Builds the plan's model on the CPU, as docs/plan-format.md says ("How the model reaches the GPU")."""
    model_spec = plan["model"]
    if "hf_config" in model_spec:
        workload = _hf_workload(model_spec["hf_config"], training)
    elif "torchvision" in model_spec:
        workload = _torchvision_workload(model_spec, training)
    else:
        workload = _layer_list_workload(model_spec, training)
    if "hf_config" not in model_spec:
        if training["lora"]:
            raise PlanError("training.lora", "LoRA is measured on Hugging Face models only")
        freeze_parameters(workload.model, training["freeze"])
    parameters = list(workload.model.parameters())
    workload.facts.update(
        model_class=type(workload.model).__name__,
        parameter_tensors=len(parameters),
        parameter_count=sum(p.numel() for p in parameters),
        trainable_parameter_count=sum(p.numel() for p in parameters if p.requires_grad),
        parameter_bytes=sum(p.numel() * p.element_size() for p in parameters),
        buffer_bytes=sum(b.numel() * b.element_size() for b in workload.model.buffers()),
    )
    return workload


def _dtype_keyword(transformers_version: str) -> str:
    """`from_config` takes `dtype` from transformers 4.56 on, `torch_dtype` before."""
    major, minor = (int(part) for part in re.findall(r"\d+", transformers_version)[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def _json_numbers_as_declared(config_class, values: dict) -> dict:
    """A config.json written by JavaScript (memplan's app and CLI) has no `30.0`: a float field with a whole value
    reads back as an int, which transformers' strict config dataclasses (5.x) refuse ("expected float, got int").
    Such ints become floats, as they were in the model's own config.json."""
    hints = {}
    for cls in reversed(config_class.__mro__):
        names = vars(sys.modules[cls.__module__]) if cls.__module__ in sys.modules else {}
        for name, annotation in vars(cls).get("__annotations__", {}).items():
            try:  # one at a time: typing.get_type_hints fails on a whole class for one unresolved name
                hints[name] = eval(annotation, {"torch": torch, **names}) if isinstance(annotation, str) else annotation
            except Exception:
                hints.pop(name, None)
    out = dict(values)
    for key, value in values.items():
        if type(value) is not int or key not in hints:
            continue
        allowed = typing.get_args(hints[key]) or (hints[key],)
        if float in allowed and int not in allowed:
            out[key] = float(value)
    return out


def _hf_workload(config_dict: dict, training: dict) -> Workload:
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = config_dict["model_type"]
    if model_type not in CONFIG_MAPPING:
        raise PlanError("model.hf_config.model_type", f"transformers {transformers.__version__} has no {model_type!r}")
    # What AutoConfig.from_pretrained does with the contents of a config.json.
    config_class = CONFIG_MAPPING[model_type]
    config = config_class.from_dict(_json_numbers_as_declared(config_class, config_dict))
    max_positions = getattr(config, "max_position_embeddings", None)
    if isinstance(max_positions, int) and model_type in ("roberta", "xlm-roberta"):
        # RoBERTa's position ids start after its padding token
        max_positions -= (config.pad_token_id if config.pad_token_id is not None else 1) + 1
    if isinstance(max_positions, int) and training["seq_len"] > max_positions:
        raise PlanError("training.seq_len", f"{training['seq_len']} is more than the model's {max_positions} positions")
    architectures = config_dict.get("architectures") or []
    # The heads memplan trains; it refuses the others (a bare model, BertForPreTraining: no loss from input_ids and
    # labels alone, so the Trainer cannot train them), and so does this script, rather than train another head
    trained_heads = ("ForCausalLM", "LMHeadModel", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification")
    if architectures and not architectures[0].endswith(trained_heads):
        raise PlanError("model.hf_config.architectures",
                        f"{architectures[0]!r} is not a head memplan trains (it refuses it too): name a *ForCausalLM, "
                        "*ForMaskedLM, *ForSequenceClassification or *ForTokenClassification, or leave architectures out")
    # The head: the first architecture's, as memplan reads it (a sequence or token classifier, a masked LM for the
    # encoders, else a causal LM)
    classifier = bool(architectures) and architectures[0].endswith("ForSequenceClassification")
    token_classifier = bool(architectures) and architectures[0].endswith("ForTokenClassification")
    masked_lm = not classifier and not token_classifier and (model_type in ("bert", "roberta", "xlm-roberta") or any(name.endswith("ForMaskedLM") for name in architectures))
    auto_class = (transformers.AutoModelForSequenceClassification if classifier
                  else transformers.AutoModelForTokenClassification if token_classifier
                  else transformers.AutoModelForMaskedLM if masked_lm else transformers.AutoModelForCausalLM)
    dtype_keyword = _dtype_keyword(transformers.__version__)
    model = auto_class.from_config(
        config,
        **{dtype_keyword: PARAM_DTYPES[training["precision"]]},
        attn_implementation=training["attention"],
    )
    model.train()
    if training["activation_checkpointing"]:
        reentrant = training["activation_checkpointing"] == "reentrant"
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
    vocab_size, seq_len = config.vocab_size, training["seq_len"]
    freeze_parameters(model, training["freeze"])
    fine_tuning = {}
    if training["lora"]:
        # After gradient_checkpointing_enable, as PEFT's guides do: PeftModel.__init__ then calls
        # enable_input_require_grads (the embedding's output requires grad) because the model is checkpointing.
        import peft

        lora = training["lora"]
        # A masked LM gets PEFT's plain PeftModel: PeftModelForCausalLM needs prepare_inputs_for_generation, which
        # BertForMaskedLM does not have (the adapters and what trains are the same either way). A sequence
        # classifier gets SEQ_CLS and a token classifier TOKEN_CLS, as PEFT's guides give them: the classifier trains
        # (modules_to_save).
        lora_config = peft.LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=lora.get("dropout", 0.0),
                                      target_modules=(lora["target_modules"] if isinstance(lora["target_modules"], str)
                                                      else list(lora["target_modules"])),
                                      # names a task's head joins (SEQ_CLS, TOKEN_CLS); None when the plan names none
                                      modules_to_save=list(lora.get("modules_to_save", [])) or None,
                                      ensure_weight_tying=bool(lora.get("ensure_weight_tying", False)),
                                      use_dora=bool(lora.get("use_dora", False)),
                                      task_type="SEQ_CLS" if classifier else "TOKEN_CLS" if token_classifier
                                      else None if masked_lm else "CAUSAL_LM")
        model = peft.get_peft_model(model, lora_config)
        fine_tuning = {"peft_version": peft.__version__, "peft_class": type(model).__name__,
                       "adapter_dtypes": sorted({str(p.dtype) for n, p in model.named_parameters() if "lora_" in n})}

    # A classifier's labels as a DataCollator gives them for its problem_type (transformers' loss decides it when the
    # config does not: one label is a regression, class ids are single-label): read before the first loss sets it.
    num_labels = config.num_labels
    problem = config.problem_type or ("regression" if num_labels == 1 else "single_label_classification")

    def make_inputs(batch: int) -> tuple:
        ids = torch.randint(vocab_size, (batch, seq_len), device="cuda")
        if token_classifier:
            # one class id per token
            return ids, torch.randint(num_labels, (batch, seq_len), device="cuda")
        if not classifier:
            return (ids,)
        if problem == "single_label_classification":
            # one class id per sequence
            return ids, torch.randint(num_labels, (batch,), device="cuda")
        if problem == "regression" and num_labels == 1:
            # one float32 score per sequence
            return ids, torch.rand(batch, device="cuda")
        # float32 per label: 0/1 targets (multi-label) or scores (regression)
        return ids, torch.randint(2, (batch, num_labels), dtype=torch.float32, device="cuda")

    def loss(model, ids, labels=None):
        return model(input_ids=ids, labels=ids if labels is None else labels).loss

    facts = {
        "transformers_class": type(model).__name__,
        "attn_implementation": getattr(model.config, "_attn_implementation", None),
        "resolved_hf_config": json.loads(json.dumps(model.config.to_dict(), default=str)),
        **fine_tuning,
    }
    return Workload(model, make_inputs, loss, facts)


def freeze_parameters(model: nn.Module, patterns: list[str]) -> None:
    """`training.freeze`: parameters whose name matches a pattern (fnmatch, case-sensitive) stop requiring grad."""
    for name, parameter in model.named_parameters():
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
            parameter.requires_grad_(False)


def _torchvision_workload(model_spec: dict, training: dict) -> Workload:
    import torchvision

    name = model_spec["torchvision"]
    num_classes = model_spec.get("num_classes", 1000)
    model = getattr(torchvision.models, name)(num_classes=num_classes)
    if training["activation_checkpointing"]:
        reentrant = training["activation_checkpointing"] == "reentrant"
        if name.startswith("resnet"):
            stages = [model.layer1, model.layer2, model.layer3, model.layer4]
        else:
            stages = [model.encoder.layers]
        for stage in stages:
            for i in range(len(stage)):
                stage[i] = Checkpointed(stage[i], reentrant)
    dtype = PARAM_DTYPES[training["precision"]]
    model = model.to(dtype).train()
    image_size = training["image_size"]

    def make_inputs(batch: int) -> tuple:
        x = torch.randn(batch, 3, image_size, image_size, device="cuda", dtype=dtype)
        y = torch.randint(num_classes, (batch,), device="cuda")
        return x, y

    def loss(model, x, y):
        return F.cross_entropy(model(x), y)

    return Workload(model, make_inputs, loss, {"torchvision_version": torchvision.__version__})


def _layer_list_workload(model_spec: dict, training: dict) -> Workload:
    input_shape, token_ids, output_shape = layer_list_io(model_spec)
    layers = [build_layer(spec) for spec in model_spec["layers"]]
    dtype = PARAM_DTYPES[training["precision"]]
    model = LayerList(layers, training["activation_checkpointing"]).to(dtype).train()
    num_classes, label_shape = output_shape[-1], output_shape[:-1]
    vocab_size = model_spec["layers"][0]["num_embeddings"] if token_ids else None

    def make_inputs(batch: int) -> tuple:
        if token_ids:
            x = torch.randint(vocab_size, (batch, *input_shape), device="cuda")
        else:
            x = torch.randn(batch, *input_shape, device="cuda", dtype=dtype)
        y = torch.randint(num_classes, (batch, *label_shape), device="cuda")
        return x, y

    def loss(model, x, y):
        out = model(x)
        return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    return Workload(model, make_inputs, loss, {"output_shape_per_sample": output_shape})


def make_optimizer(model: nn.Module, training: dict) -> torch.optim.Optimizer:
    """The plan's optimizer over all parameters; lr is small so that fp16 runs stay finite."""
    name = training["optimizer"]
    implementation = {"foreach": {"foreach": True}, "fused": {"fused": True}, "for_loop": {"foreach": False}}
    kwargs = {"lr": LEARNING_RATES[name], **implementation[training["optimizer_impl"]]}
    if name == "sgd":
        return torch.optim.SGD(model.parameters(), **kwargs)
    if name == "sgd_momentum":
        return torch.optim.SGD(model.parameters(), momentum=0.9, **kwargs)
    if name == "adam":
        return torch.optim.Adam(model.parameters(), **kwargs)
    return torch.optim.AdamW(model.parameters(), **kwargs)


def make_grad_scaler():
    if hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


# ---------------------------------------------------------------------------------------------------------------
# The standard training step, with memory read after each phase.
# ---------------------------------------------------------------------------------------------------------------


def memory_now() -> dict:
    """Allocated and reserved bytes right now (after the GPU has finished its queued work), and what the process
    holds outside the caching allocator (total - free - reserved, from cudaMemGetInfo: the CUDA context, loaded
    kernels, library handles such as the autograd thread's cuBLAS handle). cudaMemGetInfo's free memory is the
    device's: the figure means what it says only while this process has the GPU to itself (boundary_trials.py runs
    capped trials side by side)."""
    torch.cuda.synchronize()
    reserved = torch.cuda.memory_reserved()
    free, total = torch.cuda.mem_get_info()
    return {"allocated_bytes": torch.cuda.memory_allocated(), "reserved_bytes": reserved, "outside_allocator_bytes": total - free - reserved}


def memory_stats_now() -> dict:
    torch.cuda.synchronize()
    return dict(torch.cuda.memory_stats())


@dataclasses.dataclass
class RunRecord:
    """What run_training saw: the load phase, then one entry per optimizer step (the last may be partial)."""

    load: dict | None = None
    steps: list[dict] = dataclasses.field(default_factory=list)


def run_training(workload: Workload, training: dict, record: RunRecord, empty_cache_between_steps=False) -> None:
    """Moves the model to the GPU and runs `training["steps"]` optimizer steps of the standard step.

    Each optimizer step: torch.cuda.reset_peak_memory_stats(), then `grad_accumulation_steps` micro-steps of
    (inputs on the GPU; forward and loss, under autocast for the AMP modes; loss / grad_accumulation_steps;
    backward, through GradScaler.scale for amp_fp16), then optimizer.step() (scaler.step + scaler.update for
    amp_fp16), then optimizer.zero_grad(set_to_none=True). Raises OutOfMemoryError where PyTorch does.
    """
    model = workload.model
    model.to("cuda")
    optimizer = make_optimizer(model, training)
    scaler = make_grad_scaler() if training["precision"] == "amp_fp16" else None
    record.load = {**memory_now(), "memory_stats": memory_stats_now()}
    autocast_dtype = AUTOCAST_DTYPES.get(training["precision"])
    batch, accumulation = training["batch_size"], training["grad_accumulation_steps"]
    for step in range(1, training["steps"] + 1):
        torch.cuda.reset_peak_memory_stats()
        entry: dict = {"step": step, "micro_steps": []}
        record.steps.append(entry)
        if scaler is not None:
            entry["grad_scale_before"] = scaler.get_scale()
        for _ in range(accumulation):
            inputs = workload.make_inputs(batch)
            with torch.autocast("cuda", dtype=autocast_dtype) if autocast_dtype else contextlib.nullcontext():
                loss = workload.loss(model, *inputs)
                loss = loss / accumulation
            micro = {"after_forward": memory_now()}
            entry["micro_steps"].append(micro)
            (scaler.scale(loss) if scaler is not None else loss).backward()
            micro["after_backward"] = memory_now()
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        entry["after_optimizer_step"] = memory_now()
        optimizer.zero_grad(set_to_none=True)
        entry["after_zero_grad"] = memory_now()
        if scaler is not None:
            entry["grad_scale_after"] = scaler.get_scale()
            entry["skipped"] = entry["grad_scale_after"] < entry["grad_scale_before"]
        if empty_cache_between_steps:
            torch.cuda.empty_cache()
            entry["after_empty_cache"] = memory_now()
        entry["memory_stats"] = memory_stats_now()
        stats = entry["memory_stats"]
        entry["peak_allocated_bytes"] = stats["allocated_bytes.all.peak"]
        entry["peak_reserved_bytes"] = stats["reserved_bytes.all.peak"]
        print(
            f"  step {step}: peak {_gib(entry['peak_allocated_bytes'])} allocated, "
            f"{_gib(entry['peak_reserved_bytes'])} reserved",
            flush=True,
        )


def run_peaks(record: RunRecord, final_stats: dict) -> dict:
    """Peaks over the whole run: the maximum over the load phase and every step window (peaks are reset per step)."""
    windows = [record.load["memory_stats"]] if record.load else []
    windows += [entry["memory_stats"] for entry in record.steps if "memory_stats" in entry]
    windows.append(final_stats)
    return {
        "peak_allocated_bytes": max(w["allocated_bytes.all.peak"] for w in windows),
        "peak_reserved_bytes": max(w["reserved_bytes.all.peak"] for w in windows),
        "peak_active_bytes": max(w["active_bytes.all.peak"] for w in windows),
        "peak_requested_bytes": max(w.get("requested_bytes.all.peak", 0) for w in windows),
    }


# ---------------------------------------------------------------------------------------------------------------
# Helpers shared by the child processes.
# ---------------------------------------------------------------------------------------------------------------


def _gib(n: int | None) -> str:
    return "-" if n is None else f"{n / GIB:.2f} GiB"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment() -> dict:
    """Versions, the device and the settings that change allocations. Allocates nothing on the GPU."""
    properties = torch.cuda.get_device_properties(0)
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "torchvision": _package_version("torchvision"),
        "transformers": _package_version("transformers"),
        "device_name": torch.cuda.get_device_name(0),
        "total_memory_bytes": properties.total_memory,
        "compute_capability": [properties.major, properties.minor],
        "multi_processor_count": properties.multi_processor_count,
        "allocator_backend": torch.cuda.get_allocator_backend(),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "cudnn_deterministic": torch.backends.cudnn.deterministic,
        "sdpa_enabled": {
            backend: getattr(torch.backends.cuda, f"{backend}_sdp_enabled")() for backend in ("cudnn", "flash", "mem_efficient", "math")
        },
        "env": {
            key: value
            for key, value in sorted(os.environ.items())
            if key.startswith(("PYTORCH_", "CUBLAS", "CUBLASLT", "CUDA_", "CUDNN", "TORCH_", "NCCL_"))
        },
    }


def _error_info(error: BaseException) -> dict:
    return {"type": type(error).__name__, "message": str(error), "traceback": traceback.format_exc()}


def write_json(path: Path, data: dict) -> None:
    """Writes JSON atomically, so a killed run never leaves half a file."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=1, default=str) + "\n")
    os.replace(temporary, path)


def plain(value, memo: dict | None = None):
    """`value` rebuilt from dict, list, str, int, float, bool and None only, so any pickle reader can load it.

    Tuples become lists and anything else becomes its str(); objects shared in `value` stay shared.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    memo = {} if memo is None else memo
    if id(value) in memo:
        return memo[id(value)]
    if isinstance(value, dict):
        result: dict | list = {}
        memo[id(value)] = result
        for key, item in value.items():
            result[key if type(key) in (str, int) else str(key)] = plain(item, memo)
        return result
    if isinstance(value, (list, tuple)):
        result = []
        memo[id(value)] = result
        result.extend(plain(item, memo) for item in value)
        return result
    for kind in (bool, int, float, str):
        if isinstance(value, kind):
            return kind(value)
    return str(value)


def start_history(stacks: bool) -> None:
    """Starts recording every allocator event. Call after torch.cuda.init(): before it, there is no allocator."""
    torch.cuda.memory._record_memory_history(
        enabled="all", context="all" if stacks else None, stacks="python", max_entries=HISTORY_MAX_ENTRIES
    )


def dump_history(path: Path) -> dict:
    """Takes the snapshot, stops recording, and pickles the snapshot as plain Python data.

    The snapshot is taken first: stopping the recording clears the recorded history.
    """
    torch.cuda.synchronize()
    snapshot = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    snapshot = plain(snapshot)
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        pickle.dump(snapshot, file, protocol=PICKLE_PROTOCOL)
    os.replace(temporary, path)
    traces = snapshot.get("device_traces") or [[]]
    entries = len(traces[0]) if traces else 0
    return {
        "file": path.name,
        "bytes": path.stat().st_size,
        "trace_entries": entries,
        "max_entries": HISTORY_MAX_ENTRIES,
        "may_have_dropped_events": entries >= HISTORY_MAX_ENTRIES,
        "segments": len(snapshot.get("segments", [])),
        "pickle_protocol": PICKLE_PROTOCOL,
    }


def apply_cap(cap_bytes: int | None) -> dict:
    """Caps the allocator's reserved memory with set_per_process_memory_fraction; returns what was set."""
    total = torch.cuda.get_device_properties(0).total_memory
    if cap_bytes is None:
        return {"cap_bytes": None, "memory_fraction": None, "allowed_bytes": None}
    if cap_bytes > total:
        raise PlanError("gpu.memory_limit_bytes", f"{cap_bytes} is more than the GPU's {total} bytes")
    fraction = cap_bytes / total
    torch.cuda.set_per_process_memory_fraction(fraction, 0)
    # The allocator's limit: fraction * totalGlobalMem, truncated (CUDACachingAllocator setMemoryFraction).
    return {"cap_bytes": cap_bytes, "memory_fraction": fraction, "allowed_bytes": int(fraction * total)}


def prepare_child() -> None:
    """What every measuring child does before it builds anything: fixed seed, cuDNN autotuning off."""
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = False
    # MEMPLAN_SDPA_DISABLE=cudnn,flash: scaled_dot_product_attention as a GPU without cuDNN attention runs it (the
    # A100 runs flash attention, which takes no mask, so with a mask the memory-efficient kernel), on the GPU at
    # hand; the result's environment says which backends were enabled (sdpa_enabled)
    for backend in filter(None, (b.strip() for b in os.environ.get("MEMPLAN_SDPA_DISABLE", "").split(","))):
        if backend not in ("cudnn", "flash", "mem_efficient", "math"):
            raise PlanError("MEMPLAN_SDPA_DISABLE", f"unknown SDPA backend {backend!r}; expected cudnn, flash, mem_efficient or math")
        getattr(torch.backends.cuda, f"enable_{backend}_sdp")(False)


# ---------------------------------------------------------------------------------------------------------------
# Child job: device facts.
# ---------------------------------------------------------------------------------------------------------------


def _device_memory(**extra) -> dict:
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    return {
        "free_bytes": free,
        "total_bytes": total,
        "used_bytes": total - free,
        "allocated_bytes": torch.cuda.memory_allocated(),
        "reserved_bytes": reserved,
        "used_outside_allocator_bytes": total - free - reserved,
        **extra,
    }


def _fill_device(sizes: list[int]) -> tuple[list, list[dict]]:
    """Allocates tensors of each size in turn until the allocator raises OOM; returns them and what happened."""
    tensors, stages = [], []
    for size in sizes:
        count, message = 0, None
        while True:
            try:
                tensors.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
                count += 1
            except OutOfMemoryError as error:
                message = str(error)
                break
        stages.append({"tensor_bytes": size, "tensors": count, "oom_message": message})
        print(f"  {count} tensors of {size} bytes", flush=True)
    return tensors, stages


def job_device(job: dict) -> None:
    """Device facts: memory outside the allocator after each first use, and the most the allocator can reserve."""
    prepare_child()
    facts: dict = {"format": RESULT_FORMAT, "kind": "device", "measured_at": _now(), "status": None}
    try:
        _measure_device(facts)
        facts["status"] = "ok"
    except Exception as error:  # what was measured before the error is still written
        facts["status"], facts["error"] = "error", _error_info(error)
        traceback.print_exc()
    facts["complete"] = facts["status"] == "ok"
    write_json(Path(job["result_path"]), facts)


def _measure_device(facts: dict) -> None:
    torch.cuda.init()
    facts["environment"] = environment()
    facts["after_init"] = _device_memory()
    first = torch.zeros(1, device="cuda")
    facts["after_first_allocation"] = _device_memory()
    a = torch.randn(256, 256, device="cuda")
    before = torch.cuda.memory_allocated()
    product = a @ a
    facts["after_first_matmul"] = _device_memory(
        cublas_workspace_bytes=torch.cuda.memory_allocated() - before - product.numel() * product.element_size()
    )
    images = torch.randn(8, 3, 32, 32, device="cuda")
    weight = torch.randn(16, 3, 3, 3, device="cuda")
    torch.cuda.reset_peak_memory_stats()
    conv = F.conv2d(images, weight, padding=1)
    facts["after_first_conv"] = _device_memory(peak_allocated_bytes=torch.cuda.max_memory_allocated())
    del first, a, product, images, weight, conv
    torch.cuda.empty_cache()
    facts["before_fill"] = _device_memory()
    print("filling the GPU", flush=True)
    tensors, stages = _fill_device([GIB, 20 * MIB, MIB])
    facts["largest_reservable"] = _device_memory(stages=stages, tensors=len(tensors))
    del tensors
    torch.cuda.empty_cache()
    facts["after_release"] = _device_memory()
    facts["nvidia_smi"] = _nvidia_smi()


def _nvidia_smi() -> str | None:
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,memory.used", "--format=csv"],
            capture_output=True,
            text=True,
            timeout=20,
        )
        return result.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


# ---------------------------------------------------------------------------------------------------------------
# Child job: one recorded training run (calibration plans and trace scenarios).
# ---------------------------------------------------------------------------------------------------------------


def job_train(job: dict) -> None:
    """Runs one plan from a clean allocator, recording every allocator event, and writes <name>.json/.pickle."""
    plan = job["plan"]
    result_path = Path(job["result_path"])
    result: dict = {
        "format": RESULT_FORMAT,
        "kind": job["kind"],
        "name": job["name"],
        "measured_at": _now(),
        "plan": plan,
        "meta": job.get("meta", {}),
        "status": None,
        "complete": False,
        "oom_message": None,
        "error": None,
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
    }
    record, recording = RunRecord(), False
    started = time.monotonic()
    try:
        training = resolve_training(plan)
        result["training"] = training
        prepare_child()
        print(f"building {job['name']}", flush=True)
        workload = build_workload(plan, training)
        result["model"] = workload.facts
        result["build_seconds"] = round(time.monotonic() - started, 2)
        torch.cuda.init()
        result["environment"] = environment()
        result["cap"] = apply_cap(plan_cap_bytes(plan))
        if job["record"]:
            start_history(job.get("stacks", False))
            recording = True
        result["reserved_before_first_allocation"] = torch.cuda.memory_reserved()
        run_started = time.monotonic()
        run_training(workload, training, record, job.get("empty_cache_between_steps", False))
        result["run_seconds"] = round(time.monotonic() - run_started, 2)
        result["status"] = "ok"
    except OutOfMemoryError as error:
        result["status"], result["oom_message"] = "oom", str(error)
        print(f"OutOfMemoryError: {error}", flush=True)
    except Exception as error:  # reported in the result file; the parent goes on with the next case
        result["status"], result["error"] = "error", _error_info(error)
        traceback.print_exc()
    # Leaving the except clause released the exception, and with it the tensors its traceback held.
    gc.collect()
    if torch.cuda.is_initialized():
        final_stats = memory_stats_now()
        result.update(run_peaks(record, final_stats))
        result["max_memory_allocated"] = result["peak_allocated_bytes"]
        result["max_memory_reserved"] = result["peak_reserved_bytes"]
        result["memory_stats"] = final_stats
    result["load"] = record.load
    result["steps"] = record.steps
    if recording:
        try:
            result["snapshot"] = dump_history(result_path.with_suffix(".pickle"))
        except Exception as error:  # the measurements above are still worth writing
            result["snapshot"] = {"error": _error_info(error)}
            traceback.print_exc()
    result["complete"] = result["status"] in ("ok", "oom")
    result["seconds"] = round(time.monotonic() - started, 2)
    write_json(result_path, result)


# ---------------------------------------------------------------------------------------------------------------
# Child job: max-batch worker. Keeps the model on the CPU and runs trials that its parent sends on stdin.
# ---------------------------------------------------------------------------------------------------------------


def _send(message: dict) -> None:
    """One message to the parent, on a line of its own even if a library left a partial line on stdout."""
    sys.stdout.write("\n" + MESSAGE_MARK + json.dumps(message, default=str) + "\n")
    sys.stdout.flush()


def _release_gpu(workload: Workload, initial_state: dict) -> int:
    """Returns the model to the CPU with its initial weights and empties the allocator; returns reserved bytes left.

    Zero means the next trial starts exactly as in a fresh process.
    """
    for parameter in workload.model.parameters():
        parameter.grad = None
    workload.model.to("cpu")
    workload.model.load_state_dict(initial_state)
    gc.collect()
    torch.cuda.synchronize()
    clear_workspaces = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear_workspaces is not None:
        clear_workspaces()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_reserved()


# Errors of CUDA libraries that ran out of memory on their own rather than through the caching allocator.
LIBRARY_OOM_MARKERS = ("out of memory", "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED")


def _attempt(workload: Workload, training: dict) -> tuple[bool, str | None, str | None]:
    """Runs the trial's training; returns (fits, OOM message, kind of failure).

    Any OOM counts as not fitting: the allocator's OutOfMemoryError, or a CUDA library's own allocation failure.
    The exception is dropped on return, so the tensors its traceback held are freed before the cleanup.
    """
    try:
        run_training(workload, training, RunRecord())
        return True, None, None
    except OutOfMemoryError as error:
        return False, str(error), "OutOfMemoryError"
    except RuntimeError as error:
        if not any(marker.lower() in str(error).lower() for marker in LIBRARY_OOM_MARKERS):
            raise
        return False, str(error), "RuntimeError"


def job_worker(job: dict) -> None:
    """Max-batch worker: builds the model once, then runs one trial per batch size read from stdin."""
    plan = job["plan"]
    try:
        training = resolve_training(plan)
        prepare_child()
        workload = build_workload(plan, training)
        initial_state = {key: value.detach().clone() for key, value in workload.model.state_dict().items()}
        torch.cuda.init()
        cap = apply_cap(job["cap_bytes"])
        _send({"event": "ready", "environment": environment(), "cap": cap, "model": workload.facts})
    except Exception as error:
        traceback.print_exc()
        _send({"event": "error", "error": _error_info(error)})
        return
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        batch = json.loads(line)["batch"]
        reserved_before = torch.cuda.memory_reserved()
        torch.cuda.reset_peak_memory_stats()
        before = memory_stats_now()
        started = time.monotonic()
        trial_training = {**training, "batch_size": batch, "steps": job["steps"]}
        print(f"trial batch {batch}", flush=True)
        try:
            fits, message, failure = _attempt(workload, trial_training)
        except Exception as error:
            traceback.print_exc()
            _send({"event": "error", "error": _error_info(error)})
            return
        after = memory_stats_now()
        seconds = time.monotonic() - started
        reserved_after_cleanup = _release_gpu(workload, initial_state)
        _send(
            {
                "event": "trial",
                "batch": batch,
                "fits": fits,
                "peak_allocated_bytes": after["allocated_bytes.all.peak"],
                "peak_reserved_bytes": after["reserved_bytes.all.peak"],
                "num_alloc_retries": after["num_alloc_retries"] - before["num_alloc_retries"],
                "num_ooms": after["num_ooms"] - before["num_ooms"],
                "oom_message": message,
                "failure": failure,
                "seconds": round(seconds, 2),
                "reserved_before_bytes": reserved_before,
                "reserved_after_cleanup_bytes": reserved_after_cleanup,
            }
        )


CHILD_JOBS = {"device": job_device, "train": job_train, "worker": job_worker}


# ---------------------------------------------------------------------------------------------------------------
# Parent side: child processes.
# ---------------------------------------------------------------------------------------------------------------


def child_env(alloc_conf: str | None) -> dict:
    """The child's environment: the plan's allocator settings and nothing of the caller's."""
    env = {key: value for key, value in os.environ.items() if key not in ALLOC_CONF_VARIABLES}
    if alloc_conf:
        env["PYTORCH_CUDA_ALLOC_CONF"] = alloc_conf
    env["PYTHONUNBUFFERED"] = "1"
    return env


def child_command(job: dict) -> list[str]:
    return [sys.executable, str(SCRIPT_PATH), "_child", json.dumps(job)]


@dataclasses.dataclass
class Outcome:
    """One finished case: its status ("ok", "oom", "error", "timeout", "crashed") and its result, if written."""

    status: str
    result: dict | None
    seconds: float
    log: Path


def run_child(job: dict, alloc_conf: str | None, log_path: Path, timeout_s: float, command: list[str] | None = None) -> Outcome:
    """Runs one child job to its end (or kills it at `timeout_s`) and reads the result file it wrote. `command`: a
    process that runs the job otherwise (probe_materialize.py's `_train`: the model loaded with from_pretrained)."""
    result_path = Path(job["result_path"])
    result_path.unlink(missing_ok=True)
    started = time.monotonic()
    timed_out = False
    with open(log_path, "w") as log:
        try:
            subprocess.run(
                command or child_command(job),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=child_env(alloc_conf),
                timeout=timeout_s,
            )
        except subprocess.TimeoutExpired:
            timed_out = True
    result = json.loads(result_path.read_text()) if result_path.exists() else None
    if timed_out:
        status = "timeout"
    else:
        status = result["status"] if result else "crashed"
    return Outcome(status, result, time.monotonic() - started, log_path)


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class TrialWorker:
    """The parent's handle on a max-batch worker child: start it, send batch sizes, read trial results."""

    def __init__(self, plan: dict, cap_bytes: int | None, steps: int, log_path: Path, timeout_s: float):
        job = {"job": "worker", "plan": plan, "cap_bytes": cap_bytes, "steps": steps}
        self._log = open(log_path, "a")
        self._messages: queue.Queue = queue.Queue()
        self._process = subprocess.Popen(
            child_command(job),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env=child_env(plan_alloc_conf(plan)),
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.ready = self._receive(timeout_s)

    def _read(self) -> None:
        for line in self._process.stdout:
            if line.startswith(MESSAGE_MARK):
                self._messages.put(json.loads(line[len(MESSAGE_MARK) :]))
            elif line.strip():
                self._log.write(line)
                self._log.flush()
        self._messages.put({"event": "exit", "returncode": self._process.wait()})

    def _receive(self, timeout_s: float) -> dict:
        """The worker's next message; on a timeout the worker is killed, since it is stuck in its work."""
        try:
            return self._messages.get(timeout=max(timeout_s, 1))
        except queue.Empty:
            self._process.kill()
            return {"event": "timeout"}

    def trial(self, batch: int, timeout_s: float) -> dict:
        try:
            self._process.stdin.write(json.dumps({"batch": batch}) + "\n")
            self._process.stdin.flush()
        except OSError:  # the worker has exited; its exit message says how
            pass
        return self._receive(timeout_s)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        try:
            self._process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=10)
        self._log.close()


# ---------------------------------------------------------------------------------------------------------------
# Parent side: max-batch search.
# ---------------------------------------------------------------------------------------------------------------


class SearchStopped(Exception):
    """Raised by a trial callback to end a search early; the message says why."""


def find_max_batch(fits: Callable[[int], bool], lo: int = 1, hi: int | None = None):
    """The largest batch that fits, for a `fits` that is monotonic: doubling from `lo`, then bisection.

    Returns (largest batch that fit or 0, smallest batch that failed or None, why the search stopped early or None).
    With `hi`, no batch above `hi` is tried.
    """
    best, failed = 0, None
    try:
        batch = lo
        while hi is None or batch <= hi:
            if not fits(batch):
                failed = batch
                break
            best = batch
            if batch == hi:
                break
            batch = batch * 2 if hi is None else min(batch * 2, hi)
        while failed is not None and failed - best > 1:
            middle = (best + failed) // 2
            if fits(middle):
                best = middle
            else:
                failed = middle
    except SearchStopped as stop:
        return best, failed, str(stop)
    return best, failed, None


def max_batch_search(plan: dict, name: str, cap_bytes, lo, hi, time_limit_s: float, out_dir: Path, log: Path) -> dict:
    """Searches the largest micro-batch of one plan and writes <name>.maxbatch.json.

    Trials run in one worker process while its allocator comes back empty after each trial (as in a fresh
    process); otherwise every later trial gets a fresh worker.
    """
    training = resolve_training(plan)
    steps = max(3, training["steps"])
    started = time.monotonic()
    deadline = started + time_limit_s
    state = {"worker": None, "fresh_worker_per_trial": False, "fallback_reason": None, "ready": None}
    trials: list[dict] = []
    log.write_text("")

    def fits(batch: int) -> bool:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise SearchStopped("time limit")
        if state["worker"] is None:
            state["worker"] = TrialWorker(plan, cap_bytes, steps, log, remaining)
            state["ready"] = state["ready"] or state["worker"].ready
            if state["worker"].ready.get("event") != "ready":
                raise SearchStopped(f"worker did not start: {_describe(state['worker'].ready)}")
            remaining = deadline - time.monotonic()
        message = state["worker"].trial(batch, remaining)
        if message.get("event") != "trial":
            raise SearchStopped(f"trial at batch {batch} failed: {_describe(message)}")
        trials.append(message)
        print(
            f"    batch {batch}: {'fits' if message['fits'] else 'OOM'}, peak {_gib(message['peak_allocated_bytes'])}"
            f" allocated / {_gib(message['peak_reserved_bytes'])} reserved, {message['seconds']} s",
            flush=True,
        )
        clean = message["reserved_after_cleanup_bytes"] == 0
        if not clean and not state["fresh_worker_per_trial"]:
            state["fresh_worker_per_trial"] = True
            state["fallback_reason"] = (
                f"{message['reserved_after_cleanup_bytes']} bytes stayed reserved after the trial at batch {batch}"
            )
        if state["fresh_worker_per_trial"]:
            state["worker"].close()
            state["worker"] = None
        return message["fits"]

    try:
        best, failed, stopped = find_max_batch(fits, lo, hi)
    finally:
        if state["worker"] is not None:
            state["worker"].close()
    ready = state["ready"] or {}
    result = {
        "format": RESULT_FORMAT,
        "kind": "max_batch",
        "name": name,
        "measured_at": _now(),
        "plan": plan,
        "cap": ready.get("cap", {"cap_bytes": cap_bytes}),
        "environment": ready.get("environment"),
        "model": ready.get("model"),
        "steps_per_trial": steps,
        "lo": lo,
        "hi": hi,
        "trials": trials,
        "max_batch": best,
        "smallest_failing_batch": failed,
        "complete": stopped is None,
        "stopped": stopped,
        "trial_mode": "fresh_process_per_trial" if state["fresh_worker_per_trial"] else "one_process",
        "fallback_reason": state["fallback_reason"],
        "status": "ok" if stopped is None else "incomplete",
        "seconds": round(time.monotonic() - started, 2),
    }
    write_json(out_dir / f"{name}.maxbatch.json", result)
    return result


def _describe(message: dict) -> str:
    if message.get("event") == "error":
        return f"{message['error']['type']}: {message['error']['message']}"
    return json.dumps(message)[:300]


# ---------------------------------------------------------------------------------------------------------------
# Built-in trace scenarios.
# ---------------------------------------------------------------------------------------------------------------


def _gpt2(n_layer: int, n_embd: int, n_head: int) -> dict:
    return {
        "model": {
            "hf_config": {
                "model_type": "gpt2",
                "architectures": ["GPT2LMHeadModel"],
                "n_layer": n_layer,
                "n_embd": n_embd,
                "n_head": n_head,
                "n_positions": 1024,
                "vocab_size": 50257,
            }
        }
    }


def _scenario_plan(name: str, model: dict, conf: str | None = None, **training) -> dict:
    plan = {"format": "memplan.plan", "version": 1, "name": name, **model, "training": training}
    if conf:
        plan["allocator"] = {"conf": conf}
    plan["gpu"] = {"name": "h100-sxm"}
    return plan


_RESNET18 = {"model": {"torchvision": "resnet18", "num_classes": 1000}}
_WIDE_MLP = {
    "model": {
        "input_features": 4096,
        "layers": [
            {"type": "linear", "in_features": 4096, "out_features": 8192},
            {"type": "gelu"},
            {"type": "linear", "in_features": 8192, "out_features": 8192},
            {"type": "gelu"},
            {"type": "linear", "in_features": 8192, "out_features": 8192},
            {"type": "gelu"},
            {"type": "linear", "in_features": 8192, "out_features": 1000},
        ],
    }
}
# Activations of [3072, 8192] fp32 are 96 MiB: oversize blocks under max_split_size_mb:64.
_MLP_TRAINING = {"batch_size": 3072, "precision": "fp32", "optimizer": "adamw"}
_LM_TRAINING = {"batch_size": 8, "seq_len": 512, "precision": "amp_bf16", "optimizer": "adamw"}


@dataclasses.dataclass(frozen=True)
class TraceScenario:
    """A built-in trace: a plan, and for capped scenarios where the cap comes from."""

    about: str
    plan: dict
    empty_cache_between_steps: bool = False
    # "retry": between peak allocated and peak reserved of the uncapped probe; "oom": below its peak allocated;
    # "gc": above max_split's peak reserved, so that garbage collection (threshold 0.6) acts before the cap.
    cap_rule: str | None = None


NEAR_CAP_PROBE = _scenario_plan("near_cap probe", _gpt2(6, 768, 12), **_LM_TRAINING)
TRACE_SCENARIOS: dict[str, TraceScenario] = {
    "cnn_amp_fp16": TraceScenario(
        "resnet18, autocast fp16 + GradScaler, SGD momentum",
        _scenario_plan("cnn_amp_fp16", _RESNET18, batch_size=32, precision="amp_fp16", optimizer="sgd_momentum"),
    ),
    "transformer_ckpt": TraceScenario(
        "GPT-2 (4 layers, 512 wide), amp_bf16, non-reentrant activation checkpointing, AdamW",
        _scenario_plan("transformer_ckpt", _gpt2(4, 512, 8), activation_checkpointing="non_reentrant", **_LM_TRAINING),
    ),
    "expandable": TraceScenario(
        "GPT-2 (4 layers, 512 wide), amp_bf16, expandable_segments:True",
        _scenario_plan("expandable", _gpt2(4, 512, 8), "expandable_segments:True", **_LM_TRAINING),
    ),
    "max_split": TraceScenario(
        "wide MLP with 96 MiB activations, max_split_size_mb:64",
        _scenario_plan("max_split", _WIDE_MLP, "max_split_size_mb:64", **_MLP_TRAINING),
    ),
    "max_split_gc": TraceScenario(
        "the max_split MLP with garbage_collection_threshold:0.6 under a cap 1.25x max_split's peak reserved",
        _scenario_plan(
            "max_split_gc", _WIDE_MLP, "max_split_size_mb:64,garbage_collection_threshold:0.6", **_MLP_TRAINING
        ),
        cap_rule="gc",
    ),
    "roundup": TraceScenario(
        "GPT-2 (4 layers, 512 wide) at batch 6, seq 384, roundup_power2_divisions:4",
        _scenario_plan(
            "roundup",
            _gpt2(4, 512, 8),
            "roundup_power2_divisions:4",
            **{**_LM_TRAINING, "batch_size": 6, "seq_len": 384},
        ),
    ),
    "empty_cache": TraceScenario(
        "resnet18 fp32 SGD, torch.cuda.empty_cache() after every step",
        _scenario_plan("empty_cache", _RESNET18, batch_size=16, precision="fp32", optimizer="sgd"),
        empty_cache_between_steps=True,
    ),
    "near_cap_retry": TraceScenario(
        "GPT-2 (6 layers, 768 wide), amp_bf16, capped between peak allocated and peak reserved: release and retry",
        {**NEAR_CAP_PROBE, "name": "near_cap_retry"},
        cap_rule="retry",
    ),
    "oom_under_cap": TraceScenario(
        "the near_cap_retry model capped at 85% of its peak allocated: ends in OutOfMemoryError",
        {**NEAR_CAP_PROBE, "name": "oom_under_cap"},
        cap_rule="oom",
    ),
}
RETRY_CAP_ATTEMPTS = 3


def _round_to(n: float, step: int, up: bool) -> int:
    return int((math.ceil if up else math.floor)(n / step) * step)


class Runner:
    """Runs cases for one output directory, prints progress, keeps index.json and honours a time budget."""

    def __init__(self, out_dir: Path, time_budget_s: float | None, stacks: bool, resume: bool):
        self.out_dir = out_dir
        self.logs = out_dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.started = time.monotonic()
        self.deadline = None if time_budget_s is None else self.started + time_budget_s
        self.stacks = stacks
        self.resume = resume
        self.finished: dict[Path, Outcome] = {}  # this session's runs, so a shared source run happens once
        self.index = {
            "format": "memplan.measurement-index",
            "version": 1,
            "started_at": _now(),
            "script": SCRIPT_PATH.name,
            "time_budget_s": time_budget_s,
            "cases": [],
            "skipped": [],
        }
        index_path = out_dir / "index.json"
        if resume and index_path.exists():  # go on with the earlier run's index
            earlier = json.loads(index_path.read_text())
            self.index["cases"] = earlier.get("cases", [])
            runs = earlier.get("earlier_runs", [])
            keys = ("started_at", "finished_at", "time_budget_s", "elapsed_s", "skipped")
            self.index["earlier_runs"] = runs + [{key: earlier.get(key) for key in keys}]

    # -- bookkeeping --------------------------------------------------------------------------------------------

    def remaining(self) -> float:
        return math.inf if self.deadline is None else self.deadline - time.monotonic()

    def time_left_for(self, kind: str, name: str, needed_s: float = 20) -> bool:
        """False (and the case listed as skipped) when the budget cannot fit another case."""
        if self.remaining() >= needed_s:
            return True
        self.skip(kind, name, "time budget spent")
        return False

    def skip(self, kind: str, name: str, reason: str) -> None:
        entry = {"kind": kind, "name": name, "reason": reason}
        if entry in self.index["skipped"]:
            return
        self.index["skipped"].append(entry)
        print(f"[{self._clock()}] skipped {kind} {name}: {reason}", flush=True)
        self.save_index()

    def add_case(self, kind: str, name: str, status: str, seconds: float, files: list[str], summary: dict) -> None:
        case = {"kind": kind, "name": name, "status": status, "seconds": round(seconds, 1), "files": files}
        self.index["cases"].append({**case, "summary": summary})
        self.save_index()

    def save_index(self) -> None:
        self.index["elapsed_s"] = round(time.monotonic() - self.started, 1)
        write_json(self.out_dir / "index.json", self.index)

    def _clock(self) -> str:
        return f"{time.monotonic() - self.started:7.1f} s"

    def _timeout(self, preferred_s: float) -> float:
        return max(1.0, min(preferred_s, self.remaining()))

    def _done_before(self, result_path: Path) -> dict | None:
        """With --resume, the earlier result of a case that finished."""
        if not self.resume or not result_path.exists():
            return None
        result = json.loads(result_path.read_text())
        return result if result.get("complete") else None

    # -- cases --------------------------------------------------------------------------------------------------

    def device(self) -> None:
        if not self.time_left_for("device", "device_facts"):
            return
        path = self.out_dir / "device_facts.json"
        if self._done_before(path):
            print(f"[{self._clock()}] device facts: done before", flush=True)
            return
        print(f"[{self._clock()}] device facts ...", flush=True)
        outcome = run_child({"job": "device", "result_path": str(path)}, None, self.logs / "device.log", self._timeout(180))
        summary = {}
        if outcome.result:
            reservable = outcome.result.get("largest_reservable", {})
            summary = {
                "total_memory_bytes": reservable.get("total_bytes"),
                "largest_reservable_bytes": reservable.get("reserved_bytes"),
                "context_bytes": outcome.result.get("after_init", {}).get("used_bytes"),
            }
        self._report("device", "device_facts", outcome, [path.name], summary)

    def train(self, kind: str, name: str, plan: dict, directory: Path, scenario: TraceScenario | None = None,
              record: bool = True, meta: dict | None = None, reuse: bool = True) -> Outcome | None:
        """One recorded training run in a fresh child: <directory>/<name>.json and .pickle."""
        directory.mkdir(parents=True, exist_ok=True)
        result_path = directory / f"{name}.json"
        if reuse and result_path in self.finished:
            return self.finished[result_path]
        earlier = self._done_before(result_path) if reuse else None
        if earlier:
            print(f"[{self._clock()}] {kind} {name}: done before", flush=True)
            return Outcome(earlier["status"], earlier, 0.0, self.logs / f"{name}.log")
        if not self.time_left_for(kind, name):
            return None
        print(f"[{self._clock()}] {kind} {name} ...", flush=True)
        job = {
            "job": "train",
            "kind": kind,
            "name": name,
            "plan": plan,
            "result_path": str(result_path),
            "record": record,
            "stacks": self.stacks,
            "empty_cache_between_steps": bool(scenario and scenario.empty_cache_between_steps),
            "meta": meta or {},
        }
        outcome = run_child(job, plan_alloc_conf(plan), self.logs / f"{name}.log", self._timeout(240))
        files = [path.name for path in (result_path, result_path.with_suffix(".pickle")) if path.exists()]
        self._report(kind, name, outcome, files, _train_summary(outcome.result))
        self.finished[result_path] = outcome
        return outcome

    def _report(self, kind: str, name: str, outcome: Outcome, files: list[str], summary: dict) -> None:
        text = ", ".join(f"{key} {_gib(value) if key.endswith('bytes') else value}" for key, value in summary.items())
        print(f"[{self._clock()}] {kind} {name}: {outcome.status} ({outcome.seconds:.1f} s) {text}", flush=True)
        if outcome.status not in ("ok", "oom"):
            error = (outcome.result or {}).get("error")
            if error:
                print(f"    {error['type']}: {error['message']}", flush=True)
            print("    log tail:\n" + "\n".join("      " + line for line in log_tail(outcome.log).splitlines()), flush=True)
        self.add_case(kind, name, outcome.status, outcome.seconds, files, summary)

    def trace(self, name: str) -> None:
        """One built-in scenario; capped ones first get the peaks they are derived from."""
        scenario = TRACE_SCENARIOS[name]
        directory = self.out_dir / "traces"
        if scenario.cap_rule is None:
            self.train("trace", name, scenario.plan, directory, scenario, meta={"about": scenario.about})
            return
        if scenario.cap_rule == "gc":
            source = self.train("trace", "max_split", TRACE_SCENARIOS["max_split"].plan, directory, None,
                                meta={"about": TRACE_SCENARIOS["max_split"].about})
        else:
            source = self.train("trace", "near_cap_probe", NEAR_CAP_PROBE, directory, None, record=False,
                                meta={"about": "uncapped run of the near_cap_retry model; gives the caps"})
        if source is None or source.status != "ok":
            self.skip("trace", name, "the run its cap is derived from did not succeed")
            return
        allocated, reserved = source.result["peak_allocated_bytes"], source.result["peak_reserved_bytes"]
        meta = {"about": scenario.about, "source_peak_allocated_bytes": allocated, "source_peak_reserved_bytes": reserved}
        if scenario.cap_rule == "gc":
            cap = _round_to(reserved / 0.8, 2 * MIB, up=True)
            self._capped(name, scenario, cap, meta)
        elif scenario.cap_rule == "oom":
            cap = _round_to(0.85 * allocated, 2 * MIB, up=False)
            self._capped(name, scenario, cap, {**meta, "expect": "oom"})
        else:
            self._near_cap_retry(name, scenario, allocated, reserved, meta)

    def _capped(self, name: str, scenario: TraceScenario, cap: int, meta: dict, reuse=True) -> Outcome | None:
        plan = {**scenario.plan, "gpu": {"memory_limit_bytes": cap}}
        return self.train("trace", name, plan, self.out_dir / "traces", scenario, meta=meta, reuse=reuse)

    def _near_cap_retry(self, name: str, scenario: TraceScenario, allocated: int, reserved: int, meta: dict) -> None:
        """Caps between peak allocated and peak reserved until a run retries (num_alloc_retries > 0) without OOM.

        The cap sits at allocated + t * (reserved - allocated): t moves up after an OOM and down after a run
        without retries (bisection on t, at most RETRY_CAP_ATTEMPTS runs). The last run's files stay.
        """
        earlier = self._done_before(self.out_dir / "traces" / f"{name}.json")
        if earlier and earlier.get("meta", {}).get("goal_met"):
            print(f"[{self._clock()}] trace {name}: done before", flush=True)
            return
        if reserved - allocated < 4 * MIB:
            self.skip("trace", name, "peak reserved is within 4 MiB of peak allocated: no room for a cap between")
            return
        low, high, attempts = 0.0, 1.0, []
        for _ in range(RETRY_CAP_ATTEMPTS):
            t = (low + high) / 2
            cap = _round_to(allocated + t * (reserved - allocated), 2 * MIB, up=True)
            outcome = self._capped(name, scenario, cap, {**meta, "attempts": attempts}, reuse=False)
            if outcome is None or outcome.result is None or "memory_stats" not in outcome.result:
                return
            retries = outcome.result["memory_stats"].get("num_alloc_retries", 0)
            attempts.append({"t": t, "cap_bytes": cap, "status": outcome.status, "num_alloc_retries": retries})
            goal_met = outcome.status == "ok" and retries > 0
            self._patch_meta(name, {"attempts": attempts, "goal_met": goal_met})
            if goal_met:
                return
            if outcome.status == "oom":
                low = t
            else:
                high = t

    def _patch_meta(self, name: str, meta: dict) -> None:
        path = self.out_dir / "traces" / f"{name}.json"
        if path.exists():
            result = json.loads(path.read_text())
            result["meta"].update(meta)
            write_json(path, result)

    def max_batch(self, plan_path: Path, plan: dict, cap_bytes, lo: int, hi: int | None, time_limit_s: float,
                  directory: Path) -> None:
        name = plan_path.stem
        directory.mkdir(parents=True, exist_ok=True)
        earlier = self._done_before(directory / f"{name}.maxbatch.json")
        if earlier:
            print(f"[{self._clock()}] max-batch {name}: done before (max batch {earlier['max_batch']})", flush=True)
            return
        if not self.time_left_for("max_batch", name, needed_s=30):
            return
        print(f"[{self._clock()}] max-batch {name} (cap {_gib(cap_bytes)}) ...", flush=True)
        started = time.monotonic()
        result = max_batch_search(
            plan, name, cap_bytes, lo, hi, min(time_limit_s, self.remaining() - 5), directory, self.logs / f"{name}.maxbatch.log"
        )
        summary = {"max_batch": result["max_batch"], "trials": len(result["trials"]), "trial_mode": result["trial_mode"]}
        if result["stopped"]:
            summary["stopped"] = result["stopped"]
        outcome = Outcome(result["status"], result, time.monotonic() - started, self.logs / f"{name}.maxbatch.log")
        self._report("max_batch", name, outcome, [f"{name}.maxbatch.json"], summary)


def _train_summary(result: dict | None) -> dict:
    if not result:
        return {}
    summary = {
        "peak_allocated_bytes": result.get("peak_allocated_bytes"),
        "peak_reserved_bytes": result.get("peak_reserved_bytes"),
    }
    cap = result.get("cap") or {}
    if cap.get("cap_bytes"):
        summary["cap_bytes"] = cap["cap_bytes"]
        summary["num_alloc_retries"] = result.get("memory_stats", {}).get("num_alloc_retries")
    if result.get("oom_message"):
        summary["oom"] = True
    return summary


# ---------------------------------------------------------------------------------------------------------------
# Command line.
# ---------------------------------------------------------------------------------------------------------------


def _load_plans(paths: list[Path]) -> list[tuple[Path, dict]]:
    """Reads and checks every plan before anything runs, so a typo fails at once."""
    return [(Path(path), load_plan(Path(path))) for path in paths]


def command_device(args, runner: Runner) -> None:
    runner.device()


def command_trace(args, runner: Runner) -> None:
    names = list(TRACE_SCENARIOS) if "all" in args.names else args.names
    for name in names:
        runner.trace(name)


def command_plan(args, runner: Runner) -> None:
    for path, plan in _load_plans(args.plans):
        runner.train("calibration", path.stem, plan, runner.out_dir, meta={"plan_file": path.name})


def command_max_batch(args, runner: Runner) -> None:
    for path, plan in _load_plans(args.plans):
        cap = args.cap_bytes if args.cap_bytes is not None else plan_cap_bytes(plan)
        runner.max_batch(path, plan, cap, args.lo, args.hi, args.time_limit, runner.out_dir)


ALL_PARTS = ("device", "traces", "calibration", "max-batch")


def command_all(args, runner: Runner) -> None:
    parts = ALL_PARTS if args.parts == "all" else tuple(part.strip() for part in args.parts.split(","))
    for part in parts:
        if part not in ALL_PARTS:
            raise SystemExit(f"--parts: unknown part {part!r}; expected some of {', '.join(ALL_PARTS)}")
    scenarios = Path(args.scenarios)
    calibration = _load_plans(sorted((scenarios / "calibration").glob("*.json"))) if "calibration" in parts else []
    searches = _load_plans(sorted((scenarios / "maxbatch").glob("*.json"))) if "max-batch" in parts else []
    if "device" in parts:
        runner.device()
    if "traces" in parts:
        for name in TRACE_SCENARIOS:
            runner.trace(name)
    for path, plan in calibration:
        runner.train("calibration", path.stem, plan, runner.out_dir / "calibration", meta={"plan_file": path.name})
    for path, plan in searches:
        runner.max_batch(path, plan, plan_cap_bytes(plan), 1, None, args.time_limit, runner.out_dir / "maxbatch")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="memplan_measure.py",
        description="Measure PyTorch CUDA memory of training runs, to check memplan's predictions.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="{device,trace,plan,max-batch,all}")

    def command(name: str, function, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(function=function)
        sub.add_argument("--out", type=Path, required=True, help="output directory (created if missing)")
        sub.add_argument("--time-budget", type=float, default=None, help="seconds; cases after it are skipped")
        sub.add_argument("--resume", action="store_true", help="skip cases whose result in --out is complete")
        sub.add_argument("--stacks", action="store_true", help="record Python stacks in snapshots (larger files)")
        return sub

    command("device", command_device, "device facts: CUDA context, library handles, largest reservable memory")
    trace = command("trace", command_trace, "built-in allocator scenarios, each with a snapshot")
    trace.add_argument("names", nargs="+", choices=[*TRACE_SCENARIOS, "all"], metavar="NAME",
                       help=f"scenario names or all: {', '.join(TRACE_SCENARIOS)}")
    plan = command("plan", command_plan, "run plan files: memory per phase and step, peaks, snapshot")
    plan.add_argument("plans", nargs="+", type=Path, metavar="PLAN.json")
    search = command("max-batch", command_max_batch, "largest micro-batch that fits, found by trial")
    search.add_argument("plans", nargs="+", type=Path, metavar="PLAN.json")
    search.add_argument("--cap-bytes", type=int, default=None,
                        help="memory cap (default: the plan's gpu.memory_limit_bytes, else the whole GPU)")
    search.add_argument("--lo", type=int, default=1, help="first batch tried (default 1)")
    search.add_argument("--hi", type=int, default=None, help="largest batch tried (default: no limit)")
    search.add_argument("--time-limit", type=float, default=120, help="seconds per search (default 120)")
    everything = command("all", command_all, "device, traces, calibration plans and max-batch searches")
    everything.add_argument("--scenarios", default=str(SCENARIO_DIR),
                            help="folder with calibration/ and maxbatch/ plans (default: beside this script)")
    everything.add_argument("--parts", default="all", help=f"comma-separated subset of {', '.join(ALL_PARTS)}")
    everything.add_argument("--time-limit", type=float, default=90, help="seconds per max-batch search (default 90)")
    child = commands.add_parser("_child", help=argparse.SUPPRESS)
    child.add_argument("job")
    args = parser.parse_args(argv)
    if args.command == "max-batch":
        if args.lo < 1 or (args.hi is not None and args.hi < args.lo):
            parser.error("need 1 <= --lo <= --hi")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.command == "_child":
        job = json.loads(args.job)
        CHILD_JOBS[job["job"]](job)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    runner = Runner(args.out, args.time_budget, args.stacks, args.resume)
    try:
        args.function(args, runner)
    except PlanError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    runner.index["finished_at"] = _now()
    runner.save_index()
    failed = [case for case in runner.index["cases"] if case["status"] not in ("ok", "oom")]
    print(
        f"done in {time.monotonic() - runner.started:.0f} s: {len(runner.index['cases'])} cases, "
        f"{len(failed)} not ok, {len(runner.index['skipped'])} skipped; see {args.out / 'index.json'}",
        flush=True,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
