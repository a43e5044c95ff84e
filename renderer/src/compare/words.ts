/**
 * The comparison's words: each setting row's name and value (the editor's own words, i18n/shell.ts), a change
 * "Activation checkpointing: Off → Non-reentrant", and the "what changed" sentence built from the engine's
 * attribution (engine/compare/attribution.ts: ids and numbers, never sentences).
 */
import catalog from '../../../resources/gpus.json' with { type: 'json' };
import { isAllLinear, type Attribution, type ChangeEffect, type LoraSetting, type SettingKey, type SettingValue, type TargetModules } from '../../../engine/index.ts';
import type { Locale, Messages } from '../i18n/index.ts';
import { formatBytes } from '../charts/units.ts';
import { localizeEngineMessage } from '../i18n/issues.ts';

/** Column letters: the sentences say "B saves …" and the headers show the same letter. */
export const columnLetter = (i: number): string => String.fromCharCode(65 + i);

export function settingLabel(m: Messages, key: SettingKey): string {
  switch (key) {
    case 'model':
      return m.cmpModel;
    case 'training.batch_size':
      return m.batchSize;
    case 'training.seq_len':
      return m.seqLen;
    case 'training.image_size':
      return m.imageSize;
    case 'training.precision':
      return m.precision;
    case 'training.optimizer':
      return m.optimizer;
    case 'training.optimizer_impl':
      return `${m.optimizer} · ${m.optimizerImpl}`;
    case 'training.grad_accumulation_steps':
      return m.accumulation;
    case 'training.activation_checkpointing':
      return m.checkpointing;
    case 'training.attention':
      return m.attention;
    case 'training.steps':
      return m.steps;
    case 'training.grad_scaler_skipped_steps':
      return m.gradScalerSkipped;
    case 'training.lora':
      return m.lora;
    case 'training.freeze':
      return m.freeze;
    case 'allocator.conf':
      return m.allocConf;
    case 'gpu':
      return m.gpuSource;
  }
}

function word(m: Messages, key: SettingKey, value: string): string {
  const words: Partial<Record<SettingKey, Record<string, string>>> = {
    'training.optimizer': { sgd: m.optimizerSgd, sgd_momentum: m.optimizerSgdMomentum, adam: m.optimizerAdam, adamw: m.optimizerAdamw },
    'training.optimizer_impl': { foreach: m.implForeach, fused: m.implFused, for_loop: m.implForLoop },
    'training.activation_checkpointing': { non_reentrant: m.checkpointingNonReentrant, reentrant: m.checkpointingReentrant },
    'training.attention': { sdpa: m.attentionSdpa, eager: m.attentionEager },
  };
  return words[key]?.[value] ?? value;
}

const numberText = (value: number, locale: Locale): string => new Intl.NumberFormat(locale).format(value);

/**
 * target_modules as written: names joined by commas, all-linear, or a regular expression in quotes (the pattern
 * "lm_head" and the list [lm_head] are different settings).
 */
export const targetsText = (targets: TargetModules): string => (typeof targets !== 'string' ? targets.join(', ') : isAllLinear(targets) ? targets : JSON.stringify(targets));

/** "r 16, alpha 32, dropout 0.05, q_proj, v_proj" (then the modules saved whole; ", 4-bit" for a QLoRA base). */
export function loraText(m: Messages, lora: LoraSetting, locale: Locale): string {
  const n = (v: number) => numberText(v, locale);
  const adapters = m.cmpLora(n(lora.r), n(lora.alpha), n(lora.dropout), targetsText(lora.target_modules));
  const saved = lora.modules_to_save.length > 0 ? m.cmpLoraSaved(adapters, lora.modules_to_save.join(', ')) : adapters;
  const tied = lora.ensure_weight_tying ? m.cmpLoraTied(saved) : saved;
  const text = lora.use_dora ? m.cmpLoraDora(tied) : tied;
  return lora.quantization === 'none' ? text : m.cmpLoraQuantized(text, lora.quantization === '4bit' ? 4 : 8);
}

const isList = (value: SettingValue): value is readonly string[] => Array.isArray(value);

export function settingValueText(m: Messages, key: SettingKey, value: SettingValue, locale: Locale): string {
  // no LoRA: off, as a setting switched off reads everywhere in the table
  if (typeof value === 'boolean') return value ? 'true' : m.checkpointingOff;
  if (isList(value)) return value.length > 0 ? value.join(', ') : m.cmpNone;
  if (typeof value === 'number') return numberText(value, locale);
  if (typeof value === 'string') return value === '' ? m.cmpNone : word(m, key, value);
  if ('source' in value) return value.source === 'layers' ? m.layerCount(value.layer_count) : value.source === 'hf_config' ? m.cmpModelHf(value.name) : value.name;
  if ('memory_limit_bytes' in value) return m.cmpMemoryCap(formatBytes(value.memory_limit_bytes, locale));
  if ('target_modules' in value) return loraText(m, value, locale);
  return catalog.gpus.find((g) => g.id === value.id)?.name ?? value.id;
}

export function changeText(m: Messages, change: Pick<ChangeEffect, 'key' | 'from' | 'to'>, locale: Locale): string {
  return m.cmpChange(settingLabel(m, change.key), settingValueText(m, change.key, change.from, locale), settingValueText(m, change.key, change.to, locale));
}

/** Why a change has no measure of its own: PyTorch fails its step, or the engine does not simulate it (the engine's reason, in the locale's words). */
export function unmeasuredChangeText(m: Messages, change: Extract<ChangeEffect, { reason_id: string }>, locale: Locale): string {
  const reason = change.message ? localizeEngineMessage(change.message, m, locale) : '';
  return change.reason_id === 'fails_in_pytorch' ? m.cmpFailsInPytorch(reason) : m.cmpNotSimulated(reason);
}

/**
 * "B saves 9.3 GiB against A, 7.1 GiB of them from Activation checkpointing: Off → Non-reentrant": the difference in
 * peak reserved memory, and the single change that moved it most in the same direction (when there is one).
 */
export function whatChangedSentence(m: Messages, a: Attribution, plan: string, base: string, locale: Locale): string {
  const diff = a.reserved_difference_bytes;
  const size = (b: number) => formatBytes(Math.abs(b), locale);
  if (diff === 0) return m.cmpSentence(m.cmpSame(plan, base));
  const head = diff < 0 ? m.cmpSaves(plan, size(diff), base) : m.cmpNeedsMore(plan, size(diff), base);
  const lead = a.changes.find((c): c is Extract<ChangeEffect, { reserved_delta_bytes: number }> => 'reserved_delta_bytes' in c && Math.sign(c.reserved_delta_bytes) === Math.sign(diff));
  // With one change it is the whole difference: "of them" adds nothing.
  if (!lead || a.changes.length === 1) return m.cmpSentence(`${head}${a.changes.length === 1 ? m.cmpAside(changeText(m, a.changes[0]!, locale)) : ''}`);
  // Changes that overlap can each do more than all of them together: then the share would read as nonsense.
  if (Math.abs(lead.reserved_delta_bytes) > Math.abs(diff)) return m.cmpSentence(`${head}${m.cmpMostlyFrom(changeText(m, lead, locale))}`);
  const of = diff < 0 ? m.cmpOfThemFrom : m.cmpOfItFrom;
  return m.cmpSentence(`${head}${of(size(lead.reserved_delta_bytes), changeText(m, lead, locale))}`);
}
