/**
 * The plan file (`memplan.plan`, version 1): one definition, from which the TypeScript types come.
 * docs/plan-format.md explains every field. Unknown keys are rejected, so a typo is reported, not ignored.
 */
import { z } from 'zod';
import { isAllLinear, modulesToSaveNameProblem, targetPattern } from '../models/peft/lora.ts';
import { PRESETS, PRESET_NAMES } from '../models/presets.ts';

const positiveInt = z.number().int('must be a whole number').positive('must be a positive integer');
const nonNegativeInt = z.number().int('must be a whole number').nonnegative('must be zero or more');

type LayerSpec =
  | { type: 'linear'; in_features: number; out_features: number; bias?: boolean | undefined }
  | { type: 'conv2d'; in_channels: number; out_channels: number; kernel_size: number; stride?: number | undefined; padding?: number | undefined; bias?: boolean | undefined }
  | { type: 'batch_norm2d'; num_features: number }
  | { type: 'layer_norm'; normalized_shape: number }
  | { type: 'rms_norm'; normalized_shape: number }
  | { type: 'relu' | 'gelu' | 'silu' | 'tanh' | 'sigmoid' | 'flatten' }
  | { type: 'dropout'; p: number }
  | { type: 'max_pool2d'; kernel_size: number; stride?: number | undefined }
  | { type: 'adaptive_avg_pool2d'; output_size: number }
  | { type: 'embedding'; num_embeddings: number; embedding_dim: number }
  | { type: 'self_attention'; embed_dim: number; num_heads: number }
  | { type: 'residual'; layers: LayerSpec[] }
  | { type: 'repeat'; count: number; layers: LayerSpec[] };

export const layerSchema: z.ZodType<LayerSpec> = z.lazy(() =>
  z.discriminatedUnion('type', [
    z.strictObject({ type: z.literal('linear'), in_features: positiveInt, out_features: positiveInt, bias: z.boolean().optional() }),
    z.strictObject({
      type: z.literal('conv2d'),
      in_channels: positiveInt,
      out_channels: positiveInt,
      kernel_size: positiveInt,
      stride: positiveInt.optional(),
      padding: nonNegativeInt.optional(),
      bias: z.boolean().optional(),
    }),
    z.strictObject({ type: z.literal('batch_norm2d'), num_features: positiveInt }),
    z.strictObject({ type: z.literal('layer_norm'), normalized_shape: positiveInt }),
    z.strictObject({ type: z.literal('rms_norm'), normalized_shape: positiveInt }),
    z.strictObject({ type: z.enum(['relu', 'gelu', 'silu', 'tanh', 'sigmoid', 'flatten']) }),
    z.strictObject({ type: z.literal('dropout'), p: z.number().min(0).max(1) }),
    z.strictObject({ type: z.literal('max_pool2d'), kernel_size: positiveInt, stride: positiveInt.optional() }),
    z.strictObject({ type: z.literal('adaptive_avg_pool2d'), output_size: positiveInt }),
    z.strictObject({ type: z.literal('embedding'), num_embeddings: positiveInt, embedding_dim: positiveInt }),
    z.strictObject({ type: z.literal('self_attention'), embed_dim: positiveInt, num_heads: positiveInt }),
    z.strictObject({ type: z.literal('residual'), layers: z.array(layerSchema).min(1) }),
    z.strictObject({ type: z.literal('repeat'), count: positiveInt, layers: z.array(layerSchema).min(1) }),
  ]),
);

export const TORCHVISION_MODELS = ['resnet18', 'resnet34', 'resnet50', 'resnet101', 'resnet152', 'vit_b_16', 'vit_l_16'] as const;

export const modelSchema = z.union([
  z.strictObject({ preset: z.enum(PRESET_NAMES), num_classes: positiveInt.optional() }),
  z.strictObject({ hf_config: z.record(z.string(), z.unknown()) }),
  z.strictObject({ torchvision: z.enum(TORCHVISION_MODELS), num_classes: positiveInt.default(1000) }),
  z.strictObject({ layers: z.array(layerSchema).min(1), input_features: positiveInt }),
  z.strictObject({ layers: z.array(layerSchema).min(1), input_shape: z.array(positiveInt).min(1).max(3) }),
]);

export const trainingSchema = z.strictObject({
  batch_size: positiveInt,
  seq_len: positiveInt.default(512),
  image_size: positiveInt.default(224),
  precision: z.enum(['fp32', 'amp_fp16', 'amp_bf16', 'bf16', 'fp16']).default('fp32'),
  optimizer: z.enum(['sgd', 'sgd_momentum', 'adam', 'adamw']).default('adamw'),
  optimizer_impl: z.enum(['foreach', 'fused', 'for_loop']).default('foreach'),
  grad_accumulation_steps: positiveInt.default(1),
  activation_checkpointing: z
    .union([z.boolean(), z.enum(['non_reentrant', 'reentrant'])])
    .default(false)
    .transform((v) => (v === true ? 'non_reentrant' : v)),
  attention: z.enum(['sdpa', 'eager']).default('sdpa'),
  steps: positiveInt.max(20).default(3),
  grad_scaler_skipped_steps: nonNegativeInt.default(0),
  lora: z
    .strictObject({
      r: positiveInt,
      alpha: z.number().positive('must be positive'),
      dropout: z.number().min(0, 'must be zero or more').lt(1, 'must be below 1').default(0),
      target_modules: z.union([
        z.array(z.string().min(1, 'must not be empty')).min(1, 'name at least one module').superRefine((names, ctx) => {
          // PEFT reads the shorthand only as the whole value; in a list it is a module's name
          const i = names.findIndex((name) => isAllLinear(name));
          if (i >= 0) ctx.addIssue({ code: 'custom', path: [i], message: `in a list, "${names[i]}" names a module of that name: for every linear layer, write the string itself ("target_modules": "all-linear")` });
        }),
        z.string().min(1, 'must not be empty').superRefine((source, ctx) => {
          if (isAllLinear(source)) return;
          try {
            targetPattern(source);
          } catch (error) {
            ctx.addIssue({ code: 'custom', message: `is not "all-linear", and not a regular expression memplan can read: ${JSON.stringify((error as Error).message)}` });
          }
        }),
      ]),
      // PEFT's `modules_to_save`: modules kept whole and trained as a copy beside the frozen original (names a module's
      // name ends with, as PEFT matches them)
      modules_to_save: z
        .array(
          z
            .string()
            .min(1, 'must not be empty')
            .superRefine((name, ctx) => {
              const problem = modulesToSaveNameProblem(name);
              if (problem) ctx.addIssue({ code: 'custom', message: problem });
            }),
        )
        .default([]),
      // PEFT's `ensure_weight_tying`: a tied embedding and output layer named in modules_to_save share one copy
      ensure_weight_tying: z.boolean().default(false),
      // PEFT's `use_dora`: DoRA (a magnitude vector per adapted layer, and the weight's norm in every forward)
      use_dora: z.boolean().default(false),
      quantization: z.enum(['none', '4bit', '8bit']).default('none'),
    })
    .optional(),
  freeze: z.array(z.string().min(1, 'must not be empty')).default([]),
});

export const gpuSchema = z.union([
  z.strictObject({ name: z.string().min(1) }),
  z.strictObject({ memory_limit_bytes: positiveInt }),
]);

export const planSchema = z.strictObject({
  format: z.literal('memplan.plan'),
  version: z.literal(1),
  name: z.string().default(''),
  model: modelSchema,
  training: trainingSchema,
  allocator: z.strictObject({ conf: z.string().default('') }).default({ conf: '' }),
  gpu: gpuSchema.optional(),
});

export type Plan = z.output<typeof planSchema>;
export type PlanInput = z.input<typeof planSchema>;
export type ModelSpec = Plan['model'];
export type TrainingSpec = Plan['training'];
export type { LayerSpec };

/** The Hugging Face config.json a plan's model is: pasted (`hf_config`) or a preset's; null for layer lists and torchvision. */
export function hfConfigOf(model: ModelSpec): Record<string, unknown> | null {
  if ('hf_config' in model) return model.hf_config;
  if (!('preset' in model)) return null;
  const preset = PRESETS[model.preset];
  return preset?.kind === 'hf' ? preset.config : null;
}
