"""Writes the boundary suite's plans (scenarios/boundary/*.json): real max-batch searches across model families,
precisions, optimizers, checkpointing, accumulation and caps, each verified by fresh-process trials
(boundary_trials.py). The plans of scenarios/maxbatch join the suite as they are."""
import copy
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "scenarios" / "boundary"
GIB = 1 << 30


def relu_mlp():
    dims = [1024, 4096, 4096, 4096, 10]
    layers = []
    for i in range(len(dims) - 1):
        layers.append({"type": "linear", "in_features": dims[i], "out_features": dims[i + 1]})
        if i < len(dims) - 2:
            layers.append({"type": "relu"})
    return {"input_features": 1024, "layers": layers}


def convnet():
    plan = json.loads((HERE / "scenarios" / "maxbatch" / "layers_convnet_fp32_adam_128px.json").read_text())
    return plan["model"]


def hf(name):
    plan = json.loads((HERE / "scenarios" / "calibration" / name).read_text())
    return copy.deepcopy(plan["model"]["hf_config"])


def bert_large():
    config = hf("bert_base_amp_bf16_adamw.json")
    config.update(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096)
    return config


def gpt2_small():
    return hf("gpt2_small_amp_bf16_adamw.json")


def plan(name, model, cap, **training):
    gpu = {"memory_limit_bytes": int(cap * GIB)} if cap else {"name": "h100-sxm"}
    training.setdefault("batch_size", 1)
    return name, {"format": "memplan.plan", "version": 1, "name": name, "model": model, "training": training, "gpu": gpu}


CASES = [
    plan("mlp4_fp32_adam_foreach_cap2g", relu_mlp(), 2, precision="fp32", optimizer="adam", optimizer_impl="foreach"),
    plan("mlp4_amp_bf16_adam_fused_accum2_cap6g", relu_mlp(), 6, precision="amp_bf16", optimizer="adam",
         optimizer_impl="fused", grad_accumulation_steps=2),
    plan("mlp4_bf16_sgdm_forloop_cap4g", relu_mlp(), 4, precision="bf16", optimizer="sgd_momentum", optimizer_impl="for_loop"),
    plan("mlp4_amp_fp16_adamw_foreach_cap3g", relu_mlp(), 3, precision="amp_fp16", optimizer="adamw", optimizer_impl="foreach"),
    plan("mlp4_fp32_sgd_ckpt_cap2g", relu_mlp(), 2, precision="fp32", optimizer="sgd", activation_checkpointing="non_reentrant"),
    plan("mlp4_fp32_adamw_forloop_accum3_cap6g", relu_mlp(), 6, precision="fp32", optimizer="adamw", optimizer_impl="for_loop",
         grad_accumulation_steps=3),
    plan("convnet_bf16_sgdm_128px_cap3g", convnet(), 3, precision="bf16", optimizer="sgd_momentum"),
    plan("resnet18_fp32_sgdm_cap8g", {"torchvision": "resnet18"}, 8, precision="fp32", optimizer="sgd_momentum", image_size=224),
    plan("resnet50_amp_bf16_adamw_cap6g", {"torchvision": "resnet50"}, 6, precision="amp_bf16", optimizer="adamw", image_size=224),
    plan("resnet34_bf16_sgd_cap3g", {"torchvision": "resnet34"}, 3, precision="bf16", optimizer="sgd", image_size=224),
    plan("resnet50_fp32_ckpt_adam_cap8g", {"torchvision": "resnet50"}, 8, precision="fp32", optimizer="adam", image_size=224,
         activation_checkpointing="non_reentrant"),
    plan("vit_b_16_fp32_adamw_cap12g", {"torchvision": "vit_b_16"}, 12, precision="fp32", optimizer="adamw", image_size=224),
    plan("vit_l_16_fp32_sgd_cap20g", {"torchvision": "vit_l_16"}, 20, precision="fp32", optimizer="sgd", image_size=224),
    plan("vit_b_16_amp_bf16_adamw_fused_cap8g", {"torchvision": "vit_b_16"}, 8, precision="amp_bf16", optimizer="adamw",
         optimizer_impl="fused", image_size=224),
    plan("vit_b_16_amp_fp16_sgdm_ckpt_cap4g", {"torchvision": "vit_b_16"}, 4, precision="amp_fp16", optimizer="sgd_momentum",
         image_size=224, activation_checkpointing="non_reentrant"),
    plan("gpt2_small_fp32_sdpa_adamw_seq256_cap12g", {"hf_config": gpt2_small()}, 12, precision="fp32", optimizer="adamw", seq_len=256),
    plan("gpt2_small_bf16_sgdm_seq1024_cap6g", {"hf_config": gpt2_small()}, 6, precision="bf16", optimizer="sgd_momentum", seq_len=1024),
    plan("bert_large_amp_fp16_ckpt_seq512_cap16g", {"hf_config": bert_large()}, 16, precision="amp_fp16", optimizer="adamw",
         seq_len=512, activation_checkpointing="non_reentrant"),
    plan("bert_base_fp32_adamw_seq128_cap8g", {"hf_config": hf("bert_base_amp_bf16_adamw.json")}, 8, precision="fp32",
         optimizer="adamw", seq_len=128),
    plan("tinyllama_4l_amp_bf16_adamw_fused_seq512_cap12g", {"hf_config": hf("tinyllama_4l_amp_bf16_ckpt_fused.json")}, 12,
         precision="amp_bf16", optimizer="adamw", optimizer_impl="fused", seq_len=512),
    plan("qwen2_5_0_5b_amp_bf16_ckpt_seq512_cap24g", {"hf_config": hf("qwen2_5_0_5b_bf16_ckpt_eager.json")}, 24,
         precision="amp_bf16", optimizer="adamw", seq_len=512, activation_checkpointing="non_reentrant"),
    plan("mlp4_amp_bf16_adamw_fused_whole_gpu", relu_mlp(), None, precision="amp_bf16", optimizer="adamw", optimizer_impl="fused"),
    plan("resnet18_amp_bf16_sgdm_whole_gpu", {"torchvision": "resnet18"}, None, precision="amp_bf16", optimizer="sgd_momentum",
         image_size=224),
    # issue 14: the new families (qwen3, phi3, mistral beyond its window) and LoRA, with and without checkpointing
    plan("qwen3_4l_amp_bf16_adamw_ckpt_seq128_cap10g", {"hf_config": hf("qwen3_4l_amp_bf16_adamw.json")}, 10,
         precision="amp_bf16", optimizer="adamw", seq_len=128, activation_checkpointing="non_reentrant"),
    plan("phi3_4l_bf16_adamw_seq256_cap12g", {"hf_config": hf("phi3_4l_amp_bf16_adamw.json")}, 12, precision="bf16",
         optimizer="adamw", seq_len=256),
    plan("mistral_4l_bf16_window256_seq512_cap10g", {"hf_config": hf("mistral_4l_bf16_window256_s512.json")}, 10,
         precision="bf16", optimizer="adamw", seq_len=512),
    plan("lora_tinyllama_4l_bf16_ckpt_seq512_cap8g", {"hf_config": hf("lora_tinyllama_4l_amp_bf16_ckpt.json")}, 8,
         precision="bf16", optimizer="adamw", seq_len=512, activation_checkpointing="non_reentrant",
         lora={"r": 16, "alpha": 32, "dropout": 0.05,
               "target_modules": ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]}),
    plan("lora_qwen3_4l_amp_bf16_qv_seq128_cap8g", {"hf_config": hf("qwen3_4l_amp_bf16_adamw.json")}, 8, precision="amp_bf16",
         optimizer="adamw", seq_len=128, lora={"r": 16, "alpha": 32, "dropout": 0.05, "target_modules": ["q_proj", "v_proj"]}),
    plan("lora_phi3_4l_bf16_ckpt_reentrant_seq256_cap6g", {"hf_config": hf("phi3_4l_amp_bf16_adamw.json")}, 6, precision="bf16",
         optimizer="adamw", seq_len=256, activation_checkpointing="reentrant",
         lora={"r": 16, "alpha": 32, "dropout": 0.05, "target_modules": ["qkv_proj", "o_proj"]}),
]

if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    for name, p in CASES:
        (OUT / f"{name}.json").write_text(json.dumps(p, indent=1) + "\n")
    print(len(CASES), "plans in", OUT)
