/// <reference lib="dom" />
// Code inside page.evaluate runs in the page: the DOM types describe it.
/**
 * A plan file opened in the editor and exported again gives back every field it had, read as the engine reads
 * it: a QLoRA base (`training.lora.quantization`), GradScaler's skipped steps, a vision preset's classes, a memory
 * cap to the byte, a sequence length an image model ignores. The QLoRA base is shown in the LoRA section with the
 * engine's refusal beside it, and the skipped steps in their own field.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import catalogJson from '../../resources/gpus.json' with { type: 'json' };
import { parseGpuCatalog, safeParsePlan } from '../../engine/index.ts';
import { launchApp, ROOT, screenshot, waitForResult, type App } from './harness.ts';
import type { ServedWithBridge } from './serve.ts';

const catalog = parseGpuCatalog(catalogJson);

/** A small Llama: simulated in well under a second. */
const SMALL_LLAMA = { model_type: 'llama', hidden_size: 256, intermediate_size: 688, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 4096, max_position_embeddings: 512 };

const QLORA_PLAN = {
  format: 'memplan.plan',
  version: 1,
  name: 'Small Llama, QLoRA 4-bit, AMP fp16',
  model: { hf_config: SMALL_LLAMA },
  training: {
    batch_size: 4,
    seq_len: 256,
    precision: 'amp_fp16',
    grad_scaler_skipped_steps: 2,
    lora: { r: 16, alpha: 32, dropout: 0.05, target_modules: ['q_proj', 'v_proj'], quantization: '4bit' },
    freeze: ['model.embed_tokens.*'],
  },
  allocator: { conf: 'expandable_segments:True' },
  gpu: { memory_limit_bytes: 20_000_000_000 },
};

/** target_modules as one string: a pattern without a pattern's characters (only the module named lm_head), and PEFT's shorthand. */
const PATTERN_PLAN = {
  format: 'memplan.plan',
  version: 1,
  name: 'Small Llama, LoRA on the module named lm_head',
  model: { hf_config: SMALL_LLAMA },
  training: { batch_size: 4, seq_len: 256, precision: 'bf16', lora: { r: 8, alpha: 16, dropout: 0, target_modules: 'lm_head' } },
  gpu: { name: 'h100-sxm' },
};
/** An empty modules_to_save, as written: kept when exported; DoRA. */
const ALL_LINEAR_PLAN = { ...PATTERN_PLAN, name: 'Small Llama, LoRA on every linear layer', training: { ...PATTERN_PLAN.training, lora: { ...PATTERN_PLAN.training.lora, target_modules: 'ALL-LINEAR', modules_to_save: [], use_dora: true } } };
/**
 * A list with a name that has a pattern's character (one that matches nothing: noted): a list again when exported;
 * the embedding and the output layer trained whole (modules_to_save), as one tied copy (ensure_weight_tying).
 */
const LIST_PLAN = { ...PATTERN_PLAN, name: 'Small Llama, LoRA on q_proj and a name with a star', training: { ...PATTERN_PLAN.training, lora: { ...PATTERN_PLAN.training.lora, target_modules: ['q_proj', 'model.layers.0.*'], modules_to_save: ['embed_tokens', 'lm_head'], ensure_weight_tying: true } } };

const VISION_PRESET_PLAN = {
  format: 'memplan.plan',
  version: 1,
  name: 'ResNet-50 preset, 10 classes',
  model: { preset: 'resnet50', num_classes: 10 },
  training: { batch_size: 32, image_size: 160, seq_len: 77, precision: 'amp_bf16', activation_checkpointing: true, steps: 4, grad_scaler_skipped_steps: 0 },
  gpu: { name: 'a100-80gb' },
};

const EXAMPLES = readdirSync(`${ROOT}examples`)
  .filter((f) => f.endsWith('.plan.json'))
  .map((f) => JSON.parse(readFileSync(`${ROOT}examples/${f}`, 'utf8')) as { name: string });

let app: App;
let bridge: ServedWithBridge['bridge'];
beforeAll(async () => {
  app = await launchApp();
  bridge = (app.served as ServedWithBridge).bridge;
});
afterAll(async () => {
  await app?.close();
});

/** Opens a plan file through the menu, as File › Open plan… does. */
async function openPlanFile(plan: { name: string }): Promise<void> {
  bridge.queueOpenFile({ name: `${plan.name}.json`, text: JSON.stringify(plan, null, 2) });
  bridge.sendMenuCommand('open-plan');
  await expect.poll(() => app.page.locator('#plan-title').inputValue()).toBe(plan.name);
}

/** Exports the plan in the editor through the menu, and reads the file it wrote. */
async function exportPlanFile(): Promise<Record<string, unknown>> {
  const before = bridge.savedFiles.length;
  bridge.sendMenuCommand('export-plan');
  await expect.poll(() => bridge.savedFiles.length).toBe(before + 1);
  return JSON.parse(bridge.savedFiles[before]!.text) as Record<string, unknown>;
}

/** Every key path of a plan file (a config.json is one value: the editor keeps it as text). */
function keyPaths(value: object, prefix = ''): string[] {
  return Object.entries(value).flatMap(([key, v]) =>
    v !== null && typeof v === 'object' && !Array.isArray(v) && key !== 'hf_config' ? keyPaths(v as object, `${prefix}${key}.`) : [`${prefix}${key}`],
  );
}

const parsed = (plan: unknown) => {
  const result = safeParsePlan(plan, { catalog });
  if (!result.ok) throw new Error(JSON.stringify(result.issues));
  return result.plan;
};

/** A plan with keys no field holds: a misspelt one, a key of a newer memplan, and two GPUs at once. */
const UNKNOWN_KEYS_PLAN = {
  format: 'memplan.plan',
  version: 1,
  name: 'Small Llama with keys memplan does not read',
  comment: 'tried on the A100 first',
  model: { hf_config: SMALL_LLAMA },
  training: { batch_size: 4, seq_len: 256, precision: 'amp_bf16', warmup_steps: 100, lora: { r: 8, alpha: 16, target_modules: ['q_proj'], use_rslora: true } },
  gpu: { name: 'a100-80gb', memory_limit_bytes: 20_000_000_000 },
};

describe('a plan file opened and exported again', () => {
  test('gives back every field it had, with the values the engine reads', async () => {
    for (const plan of [QLORA_PLAN, PATTERN_PLAN, ALL_LINEAR_PLAN, LIST_PLAN, VISION_PRESET_PLAN, ...EXAMPLES]) {
      await openPlanFile(plan);
      const exported = await exportPlanFile();
      expect(keyPaths(exported), plan.name).toEqual(expect.arrayContaining(keyPaths(plan)));
      expect(parsed(exported), plan.name).toEqual(parsed(plan));
    }
    // A vision preset's classes are a field of the preset, as of a torchvision model.
    await openPlanFile(VISION_PRESET_PLAN);
    await app.page.locator('#tab-model').click();
    expect(await app.page.locator('#num-classes').inputValue()).toBe('10');
    await screenshot(app.page, 'preset-vision-classes-en');
    expect(app.errors).toEqual([]);
  });

  test('keeps the keys no field holds, says what is wrong with each, and takes one out when asked', async () => {
    const { page } = app;
    await openPlanFile(UNKNOWN_KEYS_PLAN);
    const exported = await exportPlanFile();
    expect(keyPaths(exported)).toEqual(expect.arrayContaining(keyPaths(UNKNOWN_KEYS_PLAN)));
    expect(exported.comment).toBe('tried on the A100 first');
    expect((exported.gpu as Record<string, unknown>).memory_limit_bytes).toBe(20_000_000_000);
    // The engine names each of them, with a button that takes it out.
    const list = page.locator('[data-testid="plan-problems"]');
    // With a GPU's name and a cap, the engine reads the name (as the editor shows it) and names the cap.
    for (const path of ['comment', 'training.warmup_steps', 'training.lora.use_rslora', 'gpu.memory_limit_bytes']) {
      await expect.poll(() => list.locator(`li:has([data-remove-key="${path}"])`).textContent().catch(() => ''), { timeout: 30_000 }).toContain(path);
    }
    expect(await list.textContent()).toContain('unknown key "warmup_steps"');
    await screenshot(page, 'plan-unknown-keys-en');
    // In Chinese: the engine's messages and the button.
    await page.locator('[data-testid="settings"]').click();
    await page.locator('[data-locale="zh-CN"]').click();
    await page.keyboard.press('Escape');
    await expect.poll(() => list.locator('[data-remove-key="comment"]').textContent()).toBe('删除');
    expect(await list.textContent()).toContain('未知的键 "warmup_steps"');
    await screenshot(page, 'plan-unknown-keys-zh-CN');
    await page.locator('[data-testid="settings"]').click();
    await page.locator('[data-locale="en"]').click();
    await page.keyboard.press('Escape');
    // Unsaved edits: removing one is an edit.
    expect(await page.locator('[data-testid="save-state"]').textContent()).not.toContain('Unsaved');
    await list.locator('[data-remove-key="training.warmup_steps"]').click();
    await expect.poll(() => list.locator('[data-remove-key="training.warmup_steps"]').count()).toBe(0);
    expect(await page.locator('[data-testid="save-state"]').textContent()).toContain('Unsaved');
    await page.locator('#tab-gpu').click();
    expect(await page.locator('#gpu').inputValue()).toBe('a100-80gb');
    for (const path of ['comment', 'training.lora.use_rslora', 'gpu.memory_limit_bytes']) await list.locator(`[data-remove-key="${path}"]`).click();
    // Nothing left that the engine does not read: the plan is simulated, on the GPU it named.
    await waitForResult(page);
    const cleaned = await exportPlanFile();
    expect(cleaned.comment).toBeUndefined();
    expect((cleaned.training as Record<string, unknown>).warmup_steps).toBeUndefined();
    expect(cleaned.gpu).toEqual({ name: 'a100-80gb' });
    const { comment: _comment, ...known } = UNKNOWN_KEYS_PLAN;
    const { warmup_steps: _warmup, ...training } = known.training;
    expect(parsed(cleaned)).toEqual(parsed({ ...known, training: { ...training, lora: { r: 8, alpha: 16, target_modules: ['q_proj'] } }, gpu: { name: 'a100-80gb' } }));
    expect(app.errors).toEqual([]);
  });

  test('a second model form is kept with a Remove button, and picking that form shows the file’s values', async () => {
    const { page } = app;
    const layers = [
      { type: 'linear', in_features: 64, out_features: 256 },
      { type: 'gelu' },
      { type: 'linear', in_features: 256, out_features: 10 },
    ];
    const plan = { format: 'memplan.plan', version: 1, name: 'Preset and a layer list at once', model: { preset: 'gpt2', layers, input_features: 64 }, training: { batch_size: 32 }, gpu: { name: 'h100-sxm' } };
    await openPlanFile(plan);
    const list = page.locator('[data-testid="plan-problems"]');
    for (const path of ['model.layers', 'model.input_features']) await expect.poll(() => list.locator(`[data-remove-key="${path}"]`).count(), { timeout: 30_000 }).toBe(1);
    expect(await exportPlanFile()).toMatchObject({ model: plan.model });
    // The layer list the file gave, not the editor's example, once the user picks that form.
    await page.locator('#tab-model').click();
    await page.locator('button[data-mode="layers"]').click();
    await expect.poll(() => page.locator('li.row[data-path^="model.layers"]').count()).toBe(layers.length);
    expect(await page.locator('#input-features').inputValue()).toBe('64');
    // The form picked holds what was kept: nothing left to remove, and the plan is simulated.
    await waitForResult(page);
    expect(await page.locator('[data-remove-key]').evaluateAll((els) => els.map((e) => e.getAttribute('data-remove-key')))).toEqual([]);
    expect((await exportPlanFile()).model).toEqual({ layers, input_features: 64 });
    expect(app.errors).toEqual([]);
  });

  test('a QLoRA base is shown in the LoRA section with the engine’s refusal beside it; the skipped steps in their field', async () => {
    const { page } = app;
    await openPlanFile(QLORA_PLAN);
    await page.locator('#tab-training').click();
    await expect.poll(() => page.locator('#lora-quantization').inputValue()).toBe('4bit');
    expect(await page.locator('#grad-scaler-skipped').inputValue()).toBe('2');
    const field = page.locator('[data-path="training.lora.quantization"]');
    await expect.poll(() => field.locator('.issues').textContent().catch(() => ''), { timeout: 30_000 }).toContain('bitsandbytes');
    expect(await page.locator('section.results').getAttribute('data-result-state')).not.toBe('ready');
    await page.locator('#lora-quantization').scrollIntoViewIfNeeded();
    await screenshot(page, 'lora-qlora-refused-en');

    // The bf16 base instead: the refusal goes, the plan is simulated.
    await page.locator('#lora-quantization').selectOption('none');
    await waitForResult(page);
    expect(await field.locator('.issues').count()).toBe(0);
    const exported = await exportPlanFile();
    expect((exported.training as { lora: { quantization: string } }).lora.quantization).toBe('none');
    expect((exported.training as { grad_scaler_skipped_steps: number }).grad_scaler_skipped_steps).toBe(2);

    // GradScaler runs with amp_fp16 alone: with another precision the field shows only while it holds a count.
    await page.locator('input[name="precision"][value="amp_bf16"]').check();
    await expect.poll(() => page.locator('#grad-scaler-skipped').count()).toBe(1);
    await page.locator('#grad-scaler-skipped').fill('0');
    await expect.poll(() => page.locator('#grad-scaler-skipped').count()).toBe(0);
    await page.locator('input[name="precision"][value="amp_fp16"]').check();
    await expect.poll(() => page.locator('#grad-scaler-skipped').inputValue()).toBe('0');

    // In Chinese: the select's choices and the hints.
    await page.locator('#lora-quantization').selectOption('4bit');
    await page.locator('[data-testid="settings"]').click();
    await page.locator('[data-locale="zh-CN"]').click();
    await page.keyboard.press('Escape');
    await expect.poll(() => page.locator('#tab-training').textContent()).toContain('训练');
    expect(await page.locator('#lora-quantization option[value="4bit"]').textContent()).toBe('4 比特（QLoRA）');
    expect(await page.locator('#grad-scaler-skipped-hint').textContent()).toContain('GradScaler');
    await expect.poll(() => field.locator('.issues').textContent().catch(() => ''), { timeout: 30_000 }).toContain('bitsandbytes');
    await page.locator('#lora-quantization').scrollIntoViewIfNeeded();
    await screenshot(page, 'lora-qlora-refused-zh-CN');
    await openPlanFile(VISION_PRESET_PLAN);
    await page.locator('#tab-model').click();
    expect(await page.locator('[data-path="model.num_classes"] label').textContent()).toBe('类别数');
    await screenshot(page, 'preset-vision-classes-zh-CN');
    await page.locator('[data-testid="settings"]').click();
    await page.locator('[data-locale="en"]').click();
    await page.keyboard.press('Escape');
    expect(app.errors).toEqual([]);
  });
});
