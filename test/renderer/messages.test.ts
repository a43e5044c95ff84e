/** The result views' words: every message in both languages, every engine id worded. */
import { describe, expect, it } from 'vitest';
import { ADVICE_IDS, NOTE_IDS, type AdviceItem, type Note } from '../../engine/result/index.ts';
import { results } from '../../renderer/src/i18n/results.ts';
import { adviceWords, categoryName, messagesFor, noteText, phaseName } from '../../renderer/src/results/words.ts';
import { CATEGORIES, PHASES } from '../../renderer/src/charts/categories.ts';

const locales = ['en', 'zh-CN'] as const;

describe('result messages', () => {
  it('has the same keys, of the same kind and arity, in English and Chinese', () => {
    const en = results.en as Record<string, unknown>;
    const zh = results['zh-CN'] as Record<string, unknown>;
    expect(Object.keys(zh).sort()).toEqual(Object.keys(en).sort());
    for (const [key, value] of Object.entries(en)) {
      expect(typeof zh[key], key).toBe(typeof value);
      if (typeof value === 'function') expect((zh[key] as (...a: unknown[]) => string).length, key).toBe(value.length);
    }
  });
  it('is Chinese in Chinese', () => {
    const zh = results['zh-CN'] as Record<string, unknown>;
    const untranslated = Object.entries(zh).filter(([, v]) => typeof v === 'string' && !/[\u4e00-\u9fff]/.test(v) && !/^(nvidia-smi)$/.test(v));
    expect(untranslated.map(([k]) => k)).toEqual([]);
  });
});

const sample: Record<(typeof ADVICE_IDS)[number], Omit<AdviceItem, 'peak_allocated_bytes' | 'peak_reserved_bytes' | 'saved_bytes' | 'fits'>> = {
  amp_bf16: { id: 'amp_bf16' },
  checkpointing: { id: 'checkpointing' },
  fused_optimizer: { id: 'fused_optimizer', optimizer: 'adamw' },
  accumulation: { id: 'accumulation', micro_batch: 4, steps: 2, effective_batch: 8, plan_effective_batch: 8 },
  expandable_segments: { id: 'expandable_segments', alloc_conf: 'expandable_segments:True' },
  sdpa: { id: 'sdpa' },
  lora: { id: 'lora', r: 8, alpha: 8, target_modules: ['q_proj', 'v_proj'] },
} as never;

const notes: Record<(typeof NOTE_IDS)[number], Note> = {
  parameters_loaded_in_training_dtype: { id: 'parameters_loaded_in_training_dtype' },
  stopped_at_oom: { id: 'stopped_at_oom', step: 1, phase: 'backward' },
  custom_gpu_from_cap: { id: 'custom_gpu_from_cap', base_gpu: 'h100-sxm', memory_limit_bytes: 200 * 1024 ** 3 },
  not_steady: { id: 'not_steady', steps: 21, reason: 'max_steps' },
};

describe('the engine ids, worded', () => {
  for (const locale of locales) {
    const m = messagesFor(locale);
    it(`words every advice id with its parameters (${locale})`, () => {
      const titles = new Set<string>();
      for (const id of ADVICE_IDS) {
        const w = adviceWords(m, { ...sample[id], peak_allocated_bytes: 1, peak_reserved_bytes: 1, saved_bytes: 1, fits: true } as AdviceItem, locale);
        expect(w.title.length).toBeGreaterThan(5);
        expect(w.cost.length).toBeGreaterThan(5);
        titles.add(w.title);
      }
      expect(titles.size).toBe(ADVICE_IDS.length);
      const acc = adviceWords(m, { ...sample.accumulation, peak_allocated_bytes: 1, peak_reserved_bytes: 1, saved_bytes: 1, fits: true } as AdviceItem, locale);
      expect(acc.title).toContain('4');
      expect(acc.title).toContain('2');
      expect(acc.detail).toContain('8');
      expect(adviceWords(m, { ...sample.expandable_segments } as AdviceItem, locale).code).toBe('PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True');
      const lora = adviceWords(m, { ...sample.lora } as AdviceItem, locale);
      expect(lora.code).toBe('LoraConfig(r=8, lora_alpha=8, target_modules=["q_proj", "v_proj"])');
      expect(lora.detail).toContain('q_proj, v_proj');
    });
    it(`words every note, phase and category (${locale})`, () => {
      for (const id of NOTE_IDS) expect(noteText(m, notes[id], locale).length).toBeGreaterThan(20);
      expect(noteText(m, notes.custom_gpu_from_cap, locale)).toContain('200.00');
      expect(noteText(m, notes.not_steady, locale)).toContain('21');
      for (const p of PHASES) expect(phaseName(m, p)).not.toBe('');
      expect(new Set(CATEGORIES.map((c) => categoryName(m, c))).size).toBe(CATEGORIES.length);
    });
  }
});
