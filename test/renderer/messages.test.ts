/**
 * The result views' words: every message in both languages, every engine id worded (the advice with its own
 * numbers, each reason a change is not advised), Chinese in the glossary's and the editor's terms, and the
 * editor's hints listing what the engine accepts.
 */
import { describe, expect, it } from 'vitest';
import { HF_MODEL_TYPES, LORA_MODEL_TYPES, WITHOUT_TOKEN_CLASSIFIER, peftDefaultTargets, safeParseHfConfig } from '../../engine/index.ts';
import { ADVICE_IDS, NOT_APPLICABLE_REASONS, NOTE_IDS, type AdviceId, type AdviceItem, type Caveat, type NotApplicable, type NotApplicableReason, type Note } from '../../engine/result/index.ts';
import { catalogues } from '../../renderer/src/i18n/index.ts';
import { results } from '../../renderer/src/i18n/results.ts';
import { shell } from '../../renderer/src/i18n/shell.ts';
import type { Locale } from '../../renderer/src/i18n/types.ts';
import { PEFT_DEFAULTS } from '../../renderer/src/editor/lora.ts';
import { localizeIssue } from '../../renderer/src/i18n/issues.ts';
import { parseAllocatorConf } from '../../engine/allocator/config.ts';
import { InputError } from '../../engine/errors.ts';
import { formatBytes } from '../../renderer/src/charts/units.ts';
import { adviceWords, caveatWords, categoryName, messagesFor, notAdvisedWords, noteText, phaseName } from '../../renderer/src/results/words.ts';
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
  bf16_weights: { id: 'bf16_weights', lora: false, hugging_face: true },
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
  checkpoint_inputs_no_grad: { id: 'checkpoint_inputs_no_grad', blocks: 22 },
  lora_targets_unmatched: { id: 'lora_targets_unmatched', targets: ['w1', 'c_attn'] },
  lora_modules_to_save_unmatched: { id: 'lora_modules_to_save_unmatched', modules: ['embed'] },
  needs_more_than_simulated: { id: 'needs_more_than_simulated', bytes: 2 ** 46 },
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
      const bf16 = adviceWords(m, { ...sample.bf16_weights } as AdviceItem, locale);
      const bf16Base = adviceWords(m, { id: 'bf16_weights', lora: true, hugging_face: false } as AdviceItem, locale);
      expect(bf16.code).toBe('from_pretrained(..., dtype=torch.bfloat16)');
      expect(bf16Base.code).toBe('model.to(torch.bfloat16)');
      expect(bf16Base.title).not.toBe(bf16.title);
      expect(bf16Base.cost).toContain('fp32');
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

describe('the advice’s own numbers', () => {
  it('words LoRA with the r and lora_alpha the engine advised, not a fixed pair', () => {
    for (const locale of locales) {
      const lora = adviceWords(messagesFor(locale), { ...sample.lora, r: 16, alpha: 32, peak_allocated_bytes: 1, peak_reserved_bytes: 1, saved_bytes: 1, fits: true } as AdviceItem, locale);
      expect(lora.detail, locale).toMatch(/r 16\b/);
      expect(lora.detail, locale).toMatch(/lora_alpha 32\b/);
      expect(lora.detail, locale).not.toMatch(/\b8\b/);
    }
  });
});

describe('why a change is not advised', () => {
  const full = (id: AdviceId, reason_id: NotApplicableReason): NotApplicable => ({ id, reason_id, ...(reason_id === 'uses_more_memory' ? { saved_bytes: -64 * 1024 ** 2 } : {}) });
  for (const locale of locales) {
    const m = messagesFor(locale);
    it(`words every change and every reason the engine gives (${locale})`, () => {
      for (const id of ADVICE_IDS) {
        for (const reason of NOT_APPLICABLE_REASONS) {
          const w = notAdvisedWords(m, full(id, reason), locale);
          expect(w.change.length, `${id} ${reason}`).toBeGreaterThan(2);
          expect(w.reason.length, `${id} ${reason}`).toBeGreaterThan(5);
          if (locale === 'zh-CN') expect(w.reason, `${id} ${reason}`).toMatch(/[\u4e00-\u9fff]/);
        }
      }
      expect(new Set(ADVICE_IDS.map((id) => notAdvisedWords(m, full(id, 'saves_nothing'), locale).change)).size).toBe(ADVICE_IDS.length);
      expect(new Set(NOT_APPLICABLE_REASONS.map((r) => notAdvisedWords(m, full('checkpointing', r), locale).reason)).size).toBe(NOT_APPLICABLE_REASONS.length);
    });
    it(`says what each reason means for its change (${locale})`, () => {
      // autocast bf16 is "already set" by any reduced precision, bf16 weights by half-precision weights, LoRA by
      // adapters or frozen parameters
      const already = ADVICE_IDS.map((id) => notAdvisedWords(m, full(id, 'already_set'), locale).reason);
      expect(new Set(already).size).toBe(4);
      expect(notAdvisedWords(m, full('amp_bf16', 'uses_more_memory'), locale).reason).toContain(formatBytes(64 * 1024 ** 2, locale));
      // the model types LoRA is advised for are the engine's, whatever its English message says
      const lora = notAdvisedWords(m, { id: 'lora', reason_id: 'no_default_targets', message: 'LoRA advice needs …; not gpt2' }, locale).reason;
      for (const type of LORA_MODEL_TYPES) expect(lora).toContain(type);
      expect(notAdvisedWords(m, { id: 'checkpointing', reason_id: 'not_simulated', message: 'the reason' }, locale).reason).toContain('the reason');
      // a LoRA variant the engine could not simulate says why, as any other change, in the interface's language
      const refused = notAdvisedWords(m, { id: 'lora', reason_id: 'not_simulated', message: 'must be below 1, got 1.5' }, locale).reason;
      expect(refused).toContain(locale === 'zh-CN' ? '必须小于 1' : 'must be below 1, got 1.5');
      expect(refused).not.toContain(LORA_MODEL_TYPES[0]!);
    });
  }
});

describe('Chinese as the glossary and the editor say it', () => {
  const zh = results['zh-CN'];
  const zhShell = shell['zh-CN'];
  it('non-reentrant is 非重入 and reentrant 重入, as the editor’s checkpointing switch says', () => {
    expect(zh.rAdviceCheckpointing).toContain(zhShell.checkpointingNonReentrant);
    expect(zh.rAdviceCheckpointing).not.toMatch(/reentrant/i);
    expect(zh.rCaveatVitGap).toContain(`使用${zhShell.checkpointingReentrant}的`);
    expect(zh.rCaveatVitGap).not.toContain('可重入');
  });
  it('batch size, batch and workspace in Chinese words, as elsewhere in the catalogue', () => {
    const text = zh.rCaveatConvEstimated('1,872');
    expect(text).not.toMatch(/batch|workspace/i);
    expect(text).toContain('批量大小为 1,872');
    expect(text).toContain(zh.rCatWorkspace);
  });
  it('routing is 路由, in at most two clauses after a colon', () => {
    const text = zh.rCaveatMoeRouting(8, 2);
    expect(text).toContain('每个 token 路由到 2 个');
    expect(text).toContain('均衡路由');
    expect(text).toContain('都路由到同样的 2 个专家');
    expect(text.split('：').length - 1).toBeLessThan(3);
  });
  it('a micro-step is 微步 and a micro-batch 微批量, everywhere', () => {
    expect(zh.rCaveatStep(4)).toContain('4 个微步');
    const every = Object.values(catalogues['zh-CN'] as unknown as Record<string, unknown>).map((v) => (typeof v === 'function' ? String(v) : String(v)));
    expect(every.filter((t) => t.includes('微批次'))).toEqual([]);
    expect(zhShell.batchSizeHint).toContain('微步');
    expect(zh.rMaxMicroBatch).toContain('微批量');
  });
  it('the effective batch is one term in the editor and the results', () => {
    expect(zhShell.effectiveBatch('32')).toBe(`${zh.rEffectiveBatch} 32`);
  });
  it('the recommendation below an unstable region, and a config key as transformers names it', () => {
    expect(zh.rUnstableRecBelow('40', '44')).toBe('推荐的批量（40）保持在 44 以下，这一范围内试过的批量都放得下。');
    expect(zh.rCaveatMixtralNotMeasured).toContain('hidden_size 1024');
  });
  it('says how the weights reach the GPU as the model is built, in every locale', () => {
    for (const locale of locales) {
      const m = messagesFor(locale);
      const said = (built_by: 'from_pretrained' | 'torchvision' | 'layers') => caveatWords(m, { id: 'parameters_loaded_in_training_dtype', built_by }, locale).text;
      expect(said('from_pretrained')).toContain('from_pretrained(..., dtype=...)');
      expect(said('torchvision')).toContain('torchvision.models');
      expect(said('torchvision')).not.toContain('from_pretrained');
      expect(said('layers')).toContain('nn.Module');
      expect(said('layers')).not.toContain('from_pretrained');
      for (const b of ['from_pretrained', 'torchvision', 'layers'] as const) expect(said(b)).toContain('.to("cuda")');
    }
  });
  it('formats a caveat’s batch with the locale’s own number format', () => {
    for (const locale of locales) expect(caveatWords(messagesFor(locale), { id: 'bf16_emulated', gpu: 't4' }, locale, () => 'Tesla T4').text).toContain('Tesla T4');
    const caveat = { id: 'conv_workspaces_estimated', batch: 1872 } as Caveat;
    expect(caveatWords(messagesFor('en'), caveat, 'en').text).toContain('batch 1,872');
    // German groups thousands with a dot: proof that the locale, not en-US, formats the number
    expect(caveatWords(messagesFor('en'), caveat, 'de' as Locale).text).toContain('batch 1.872');
  });
});

describe('the allocator settings PyTorch 2.11 refuses, or memplan does not simulate as given, in Chinese', () => {
  it('every refusal reads in Chinese beside its field', () => {
    const confs = ['backend:cudaMallocAsync', 'backend:foo', 'per_process_memory_fraction:0.5', 'per_process_memory_fraction:1.5', 'roundup_power2_divisions:0', 'pinned_num_register_threads:3', 'expandable_segments:true', 'throw_on_cudamalloc_oom:True'];
    for (const conf of confs) {
      let problem = '';
      try {
        parseAllocatorConf(conf, 'allocator.conf');
      } catch (error) {
        if (!(error instanceof InputError)) throw error;
        problem = error.problem;
      }
      expect(problem, conf).not.toBe('');
      const zh = localizeIssue(problem, catalogues['zh-CN'], 'zh-CN');
      expect(zh, conf).toMatch(/[\u4e00-\u9fff]/);
      expect(zh, conf).not.toBe(problem);
    }
  });
});

describe('the editor’s hints name what the engine accepts', () => {
  it('lists every Hugging Face model_type the engine simulates, no more, and those without a token classifier', () => {
    // the engine's refusal of another model_type lists the same ones (HF_MODEL_TYPES)
    const refusal = safeParseHfConfig({ model_type: 'not-a-model' });
    if (refusal.ok) throw new Error('accepted an unknown model_type');
    expect(/simulated: ([\w, -]+)$/.exec(refusal.issues[0]!.message)![1]!.split(', ')).toEqual(HF_MODEL_TYPES);
    const listed = (hint: string, separator: string) => hint.slice(hint.lastIndexOf(hint.includes('：') ? '：' : ': ') + 1).replace(/[.。]$/, '').trim().split(separator);
    const en = shell.en.hfHint(HF_MODEL_TYPES, WITHOUT_TOKEN_CLASSIFIER);
    const zh = shell['zh-CN'].hfHint(HF_MODEL_TYPES, WITHOUT_TOKEN_CLASSIFIER);
    expect(listed(en, ', ')).toEqual(HF_MODEL_TYPES);
    expect(listed(zh, '、')).toEqual(HF_MODEL_TYPES);
    // the model types without a token classifier, from the engine's list (checked against transformers on the H100), as each language lists things
    expect(en).toContain('a …ForTokenClassification, for every model type but gpt2, olmo2, and gemma3_text, trains a token classifier');
    expect(zh).toContain('…ForTokenClassification（gpt2、olmo2和gemma3_text 除外）训练 token 分类器');
    expect(shell.en.hfHint(HF_MODEL_TYPES, ['gpt2'])).toContain('for every model type but gpt2, trains');
  });
  it('gives PEFT’s default target modules for every model type LoRA is simulated on', () => {
    for (const locale of locales) {
      const hint = catalogues[locale].loraTargetsHint(PEFT_DEFAULTS);
      for (const type of LORA_MODEL_TYPES) {
        expect(hint, locale).toContain(type);
        expect(hint, locale).toContain(peftDefaultTargets(type)!.join(', '));
      }
      expect(hint, locale).toMatch(/gemma3_text/);
      expect(hint, locale).toMatch(/mixtral/);
    }
  });
});
