/**
 * The comparison's words for what is trained (compare/words.ts): the LoRA row reads as its LoraConfig, a plan
 * without LoRA as the table's "off", the frozen patterns as a list; the reports (export/settings.ts) say the same,
 * and the "what changed" sentence names LoRA.
 */
import { describe, expect, it } from 'vitest';
import { parsePlan, planSettings, type Attribution, type Plan, type PlanInput } from '../../engine/index.ts';
import { catalogues } from '../../renderer/src/i18n/index.ts';
import { changeText, settingLabel, settingValueText, unmeasuredChangeText, whatChangedSentence } from '../../renderer/src/compare/words.ts';
import { settingsSideBySide } from '../../renderer/src/export/settings.ts';

const llama = { model_type: 'llama', hidden_size: 256, intermediate_size: 688, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 4096 };
const planInput = (training: Record<string, unknown>) => ({ format: 'memplan.plan', version: 1, model: { hf_config: llama }, training: { batch_size: 4, seq_len: 256, ...training } }) as PlanInput;
const plan = (training: Record<string, unknown>): Plan => parsePlan(planInput(training));
const lora = { r: 16, alpha: 32, dropout: 0.05, target_modules: ['q_proj', 'v_proj'] };
const valueOf = (p: Plan, key: 'training.lora' | 'training.freeze') => planSettings(p).find((s) => s.key === key)!.value;

describe('a change without a measure of its own, worded', () => {
  const failure =
    'training.precision: a regression head (MSELoss) on a bfloat16 model fails in PyTorch: mse_loss\'s backward meets the float32 labels and throws "Found dtype Float but expected BFloat16"; train in amp_bf16 or fp32, or cast the labels to bfloat16 in your own loop';
  const change = { key: 'training.precision', from: 'amp_bf16', to: 'bf16' } as const;

  it('says PyTorch fails the step, in each language, with the engine’s reason localized', () => {
    const en = unmeasuredChangeText(catalogues.en, { ...change, reason_id: 'fails_in_pytorch', message: failure }, 'en');
    expect(en).toBe(`alone, this change makes PyTorch fail the step: ${failure}`);
    const zh = unmeasuredChangeText(catalogues['zh-CN'], { ...change, reason_id: 'fails_in_pytorch', message: failure }, 'zh-CN');
    expect(zh.startsWith('单独应用此改动时 PyTorch 会报错：training.precision: ')).toBe(true);
    expect(zh).not.toContain('fails in PyTorch'); // the reason is in Chinese too
    expect(zh).toContain('"Found dtype Float but expected BFloat16"'); // PyTorch's own words stay as it prints them
  });

  it('an unsimulated change keeps its own words', () => {
    expect(unmeasuredChangeText(catalogues.en, { ...change, reason_id: 'not_simulated', message: '' }, 'en')).toBe('not simulated alone');
    expect(unmeasuredChangeText(catalogues['zh-CN'], { ...change, reason_id: 'not_simulated', message: '' }, 'zh-CN')).toBe('无法单独模拟');
  });
});

describe('the LoRA and frozen-parameter rows, worded', () => {
  const en = catalogues.en;
  const zh = catalogues['zh-CN'];

  it('LoRA reads as its config; a QLoRA base adds its bits', () => {
    expect(settingValueText(en, 'training.lora', valueOf(plan({ lora }), 'training.lora'), 'en')).toBe('r 16, alpha 32, dropout 0.05, q_proj, v_proj');
    expect(settingValueText(en, 'training.lora', valueOf(plan({ lora: { ...lora, quantization: '4bit' } }), 'training.lora'), 'en')).toBe('r 16, alpha 32, dropout 0.05, q_proj, v_proj, 4-bit');
    expect(settingValueText(en, 'training.lora', valueOf(plan({ lora: { ...lora, quantization: '8bit', dropout: 0 } }), 'training.lora'), 'en')).toBe('r 16, alpha 32, dropout 0, q_proj, v_proj, 8-bit');
    expect(settingValueText(zh, 'training.lora', valueOf(plan({ lora: { ...lora, quantization: '4bit' } }), 'training.lora'), 'zh-CN')).toBe('r 16，alpha 32，dropout 0.05，q_proj, v_proj，4 比特量化');
    const saved = valueOf(plan({ lora: { ...lora, modules_to_save: ['embed_tokens', 'lm_head'] } }), 'training.lora');
    expect(settingValueText(en, 'training.lora', saved, 'en')).toBe('r 16, alpha 32, dropout 0.05, q_proj, v_proj, modules_to_save embed_tokens, lm_head');
    expect(settingValueText(zh, 'training.lora', saved, 'zh-CN')).toBe('r 16，alpha 32，dropout 0.05，q_proj, v_proj，modules_to_save embed_tokens, lm_head');
    const tied = valueOf(plan({ lora: { ...lora, modules_to_save: ['lm_head'], ensure_weight_tying: true } }), 'training.lora');
    expect(settingValueText(en, 'training.lora', tied, 'en')).toBe('r 16, alpha 32, dropout 0.05, q_proj, v_proj, modules_to_save lm_head, ensure_weight_tying');
    expect(settingValueText(zh, 'training.lora', valueOf(plan({ lora: { ...lora, use_dora: true } }), 'training.lora'), 'zh-CN')).toBe('r 16，alpha 32，dropout 0.05，q_proj, v_proj，DoRA');
  });

  it('no LoRA reads as the table’s off, no frozen parameters as none', () => {
    const full = plan({});
    expect(settingValueText(en, 'training.lora', valueOf(full, 'training.lora'), 'en')).toBe(en.checkpointingOff);
    expect(settingValueText(zh, 'training.lora', valueOf(full, 'training.lora'), 'zh-CN')).toBe(zh.checkpointingOff);
    expect(settingValueText(en, 'training.freeze', valueOf(full, 'training.freeze'), 'en')).toBe(en.cmpNone);
    expect(settingValueText(en, 'training.freeze', valueOf(plan({ freeze: ['model.embed_tokens.*', 'lm_head.*'] }), 'training.freeze'), 'en')).toBe('model.embed_tokens.*, lm_head.*');
  });

  it('names the rows as the editor does, in both languages', () => {
    expect(settingLabel(en, 'training.lora')).toBe(en.lora);
    expect(settingLabel(zh, 'training.lora')).toBe(zh.lora);
    expect(settingLabel(en, 'training.freeze')).toBe(en.freeze);
    expect(settingLabel(zh, 'training.freeze')).toBe(zh.freeze);
    expect(settingLabel(zh, 'training.grad_scaler_skipped_steps')).toBe(zh.gradScalerSkipped);
  });

  it('a report of a LoRA plan beside its full fine-tune shows the LoRA row as the one difference', () => {
    const rows = settingsSideBySide([planInput({}), planInput({ lora })], 'en');
    expect(rows.filter((r) => r.differs).map((r) => r.key)).toEqual(['training.lora']);
    expect(rows.find((r) => r.key === 'training.lora')!.values).toEqual(['Off', 'r 16, alpha 32, dropout 0.05, q_proj, v_proj']);
    expect(rows.find((r) => r.key === 'training.freeze')).toMatchObject({ label: 'Frozen parameters', differs: false });
  });

  it('the "what changed" sentence names LoRA as the change', () => {
    const change = { key: 'training.lora' as const, from: false, to: valueOf(plan({ lora }), 'training.lora') };
    expect(changeText(en, change, 'en')).toBe('LoRA adapters (PEFT): Off → r 16, alpha 32, dropout 0.05, q_proj, v_proj');
    const attribution: Attribution = {
      base_peak_reserved_bytes: 10 * 1024 ** 3,
      other_peak_reserved_bytes: 4 * 1024 ** 3,
      reserved_difference_bytes: -6 * 1024 ** 3,
      allocated_difference_bytes: -6 * 1024 ** 3,
      base_fits: true,
      other_fits: true,
      changes: [{ ...change, reserved_delta_bytes: -6 * 1024 ** 3, allocated_delta_bytes: -6 * 1024 ** 3, fits: true }],
      interaction_bytes: 0,
    };
    expect(whatChangedSentence(zh, attribution, 'B', 'A', 'zh-CN')).toContain('LoRA 适配器（PEFT）：关闭 → r 16，alpha 32');
  });
});
