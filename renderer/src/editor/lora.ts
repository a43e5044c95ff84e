/**
 * PEFT's default `target_modules` and the model types each is the default for, from the engine's own lists
 * (engine/models/peft/lora.ts: the model types memplan simulates LoRA on, and PEFT's default for each), so the
 * editor's hint and the "not advised" reason name exactly the models the engine accepts.
 */
import { LORA_MODEL_TYPES, peftDefaultTargets } from '../../../engine/index.ts';

export interface PeftDefault {
  targets: readonly string[];
  modelTypes: readonly string[];
}

function peftDefaults(): PeftDefault[] {
  const byTargets = new Map<string, { targets: string[]; modelTypes: string[] }>();
  for (const modelType of LORA_MODEL_TYPES) {
    const targets = peftDefaultTargets(modelType) ?? [];
    const entry = byTargets.get(targets.join()) ?? { targets, modelTypes: [] };
    entry.modelTypes.push(modelType);
    byTargets.set(targets.join(), entry);
  }
  return [...byTargets.values()];
}

/** One entry per distinct default, in the order of LORA_MODEL_TYPES: c_attn for gpt2; q_proj, v_proj for llama, …; qkv_proj for phi3; query, value for bert. */
export const PEFT_DEFAULTS: readonly PeftDefault[] = peftDefaults();

