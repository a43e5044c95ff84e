/** How the layer editor names and lays out each layer type: PyTorch's module names and the fields in order. */
import type { LayerSpec } from '../../../engine/index.ts';
import { LAYER_DEFAULTS } from '../state/plan-editor.svelte.ts';

export const MODULE_NAMES: Record<LayerSpec['type'], string> = {
  linear: 'nn.Linear',
  conv2d: 'nn.Conv2d',
  batch_norm2d: 'nn.BatchNorm2d',
  layer_norm: 'nn.LayerNorm',
  rms_norm: 'nn.RMSNorm',
  relu: 'nn.ReLU',
  gelu: 'nn.GELU',
  silu: 'nn.SiLU',
  tanh: 'nn.Tanh',
  sigmoid: 'nn.Sigmoid',
  flatten: 'nn.Flatten',
  dropout: 'nn.Dropout',
  max_pool2d: 'nn.MaxPool2d',
  adaptive_avg_pool2d: 'nn.AdaptiveAvgPool2d',
  embedding: 'nn.Embedding',
  self_attention: 'nn.MultiheadAttention',
  residual: 'Residual',
  repeat: 'Repeat',
};

/** Short labels for the fields, as PyTorch's arguments are named (shown in code font, not translated). */
export const FIELD_LABELS: Record<string, string> = {
  in_features: 'in',
  out_features: 'out',
  in_channels: 'in',
  out_channels: 'out',
  kernel_size: 'kernel',
  stride: 'stride',
  padding: 'pad',
  num_features: 'features',
  normalized_shape: 'shape',
  p: 'p',
  output_size: 'output',
  num_embeddings: 'vocab',
  embedding_dim: 'dim',
  embed_dim: 'dim',
  num_heads: 'heads',
  bias: 'bias',
};

export function fieldsOf(type: LayerSpec['type']): string[] {
  return Object.keys(LAYER_DEFAULTS[type]).filter((f) => f !== 'count');
}

/** Types offered in the "add layer" menu, grouped as a PyTorch user thinks of them. */
export const LAYER_GROUPS: { label: string; types: LayerSpec['type'][] }[] = [
  { label: 'Layers', types: ['linear', 'conv2d', 'embedding', 'self_attention'] },
  { label: 'Normalization', types: ['layer_norm', 'rms_norm', 'batch_norm2d'] },
  { label: 'Activations', types: ['relu', 'gelu', 'silu', 'tanh', 'sigmoid'] },
  { label: 'Other', types: ['dropout', 'max_pool2d', 'adaptive_avg_pool2d', 'flatten'] },
  { label: 'Blocks', types: ['residual', 'repeat'] },
];
