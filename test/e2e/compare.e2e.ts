/// <reference lib="dom" />
// Code inside page.evaluate runs in the page: the DOM types describe it.
/**
 * Comparing saved plans: three GPT-2 plans that differ (checkpointing; then also a fused optimizer on an A100
 * 40GB) ticked in the sidebar and compared. The highlighted settings are the ones that differ; every number, each
 * difference to the first plan, each single change's effect and each largest batch are the engine's own (computed
 * here with the engine, not read back from the app). The comparison is saved, reopened as it was, reopened again
 * after one of its plans was edited (it says so and shows the edit), and shown in Chinese. A LoRA fine-tune beside
 * the full fine-tune of the same model differs in the LoRA row alone, and what changed names LoRA.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import catalogJson from '../../resources/gpus.json' with { type: 'json' };
import { attribute, findMaxBatch, parseGpuCatalog, parsePlan, planGpu, simulate, type Plan, type PlanInput } from '../../engine/index.ts';
import type { MemplanApi } from '../../electron/common/ipc.ts';
import { launchApp, screenshot, type App } from './harness.ts';
import type { ServedWithBridge } from './serve.ts';

const catalog = parseGpuCatalog(catalogJson);
const device = (plan: Plan) => planGpu(plan, catalog);

const training = { batch_size: 8, seq_len: 1024, precision: 'amp_bf16', optimizer: 'adamw' };
const PLANS = [
  { name: 'GPT-2, AMP bf16', plan: { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training, gpu: { name: 'h100-sxm' } } },
  { name: 'GPT-2, checkpointing', plan: { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { ...training, activation_checkpointing: 'non_reentrant' }, gpu: { name: 'h100-sxm' } } },
  {
    name: 'GPT-2, checkpointing, fused AdamW, A100 40GB',
    plan: { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { ...training, activation_checkpointing: 'non_reentrant', optimizer_impl: 'fused' }, gpu: { name: 'a100-40gb' } },
  },
];
const parsed = PLANS.map((p) => parsePlan(p.plan as PlanInput, { catalog }));
const sims = parsed.map((p) => simulate(p, { device: device(p) }));
const searches = parsed.map((p) => findMaxBatch(p, { device: device(p) }));
const attributions = [null, attribute(parsed[0]!, parsed[1]!, { device }), attribute(parsed[0]!, parsed[2]!, { device })];

let app: App;
beforeAll(async () => {
  app = await launchApp({ height: 1000 });
});
afterAll(async () => {
  await app?.close();
});

const api = (page: App['page']) => page.evaluate.bind(page);

/** The whole comparison in one picture: the window made as tall as the view's content, then back. */
async function screenshotWhole(page: App['page'], name: string): Promise<void> {
  const body = page.locator('[data-testid="compare-view"] .body');
  await body.evaluate((el) => el.scrollTo(0, 0));
  const extra = await body.evaluate((el) => el.scrollHeight - el.clientHeight);
  const size = page.viewportSize()!;
  await page.setViewportSize({ width: size.width, height: size.height + extra });
  await page.waitForTimeout(400); // the charts redraw at their new size
  await screenshot(page, name);
  await page.setViewportSize(size);
}
const cells = (page: App['page'], row: string) => page.locator(`[data-testid="compare-numbers"] tr[data-row="${row}"] td`);
async function values(page: App['page'], row: string): Promise<number[]> {
  return (await cells(page, row).evaluateAll((tds) => tds.map((td) => (td as HTMLElement).dataset.value ?? ''))).map(Number);
}
async function waitDone(page: App['page']): Promise<void> {
  await page.locator('[data-testid="compare-view"][data-phase="done"]').waitFor({ timeout: 90_000 });
}

describe('comparing saved plans', () => {
  let ids: string[] = [];

  test('three saved plans compared side by side: the differing settings highlighted, the engine’s numbers, what changed', async () => {
    const { page } = app;
    ids = await api(page)(async (plans) => {
      const memplan = (window as unknown as { memplan: MemplanApi }).memplan;
      const out: string[] = [];
      for (const p of plans) out.push((await memplan.plans.save({ name: p.name, plan: p.plan })).id);
      return out;
    }, PLANS);
    const extra = await api(page)(async (plan) => {
      const memplan = (window as unknown as { memplan: MemplanApi }).memplan;
      return (await memplan.plans.save({ name: 'to delete', plan })).id;
    }, PLANS[0]!.plan);
    await page.reload();
    await page.locator('#plan-title').waitFor();
    // A plan deleted while ticked is unticked.
    await page.locator('.plan-item[data-plan-name="to delete"] .pick input').check();
    await page.locator('.plan-item[data-plan-name="to delete"]').hover();
    await page.locator('.plan-item[data-plan-name="to delete"] button[aria-label^="Delete"]').click();
    await expect.poll(() => page.locator('[data-testid="compare-bar"]').count()).toBe(0);
    expect(extra).toBeTruthy();
    for (const p of PLANS) await page.locator(`.plan-item[data-plan-name="${p.name}"] .pick input`).check();
    // Ticked in order: the letters A, B, C are the columns (the list shows the newest first).
    expect(await page.locator('.plan-item.picked .pick .box').allTextContents()).toEqual(['C', 'B', 'A']);
    await page.locator('[data-testid="compare-selected"]').click();
    await waitDone(page);

    // Settings: only the three that differ are shown, highlighted; the equal ones fold out on demand.
    const differing = () => page.locator('[data-testid="compare-settings"] tbody tr[data-differs="true"]').evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset.setting));
    expect(await differing()).toEqual(['training.optimizer_impl', 'training.activation_checkpointing', 'gpu']);
    expect(await page.locator('[data-testid="compare-settings"] tbody tr').count()).toBe(3);
    expect(await page.locator('[data-testid="compare-settings"] tr[data-setting="gpu"] td').allTextContents()).toEqual(['NVIDIA H100 80GB HBM3', 'NVIDIA H100 80GB HBM3', 'NVIDIA A100-SXM4-40GB']);
    expect(await page.locator('[data-testid="compare-settings"] tr[data-setting="training.activation_checkpointing"] td.changed').count()).toBe(2);
    await page.locator('[data-testid="toggle-equal"]').click();
    expect(await page.locator('[data-testid="compare-settings"] tbody tr').count()).toBe(16);
    expect(await page.locator('[data-testid="compare-settings"] tbody tr[data-differs="false"]').count()).toBe(13);
    await page.locator('[data-testid="toggle-equal"]').click();

    // Numbers: the engine's, each with its difference to the first plan in bytes and %.
    expect(await values(page, 'peak_allocated')).toEqual(sims.map((s) => s.peak_allocated_bytes));
    expect(await values(page, 'peak_reserved')).toEqual(sims.map((s) => s.peak_reserved_bytes));
    expect(await values(page, 'nvidia_smi')).toEqual(sims.map((s) => s.nvidia_smi_bytes));
    for (const k of ['parameter', 'gradient', 'optimizer_state', 'activation'] as const) expect(await values(page, k)).toEqual(sims.map((s) => s.breakdown_at_peak[k]));
    expect(await values(page, 'max_batch')).toEqual(searches.map((s) => s.max_batch));
    expect(await values(page, 'recommended_batch')).toEqual(searches.map((s) => s.recommendation.batch));
    const diffs = await cells(page, 'peak_reserved').locator('.diff').evaluateAll((els) => els.map((e) => Number((e as HTMLElement).dataset.diff)));
    expect(diffs).toEqual([sims[1]!.peak_reserved_bytes - sims[0]!.peak_reserved_bytes, sims[2]!.peak_reserved_bytes - sims[0]!.peak_reserved_bytes]);
    expect(await cells(page, 'peak_reserved').nth(1).locator('.diff').textContent()).toMatch(/^[-−][\d.]+\sGiB · [-−][\d.]+%$/);
    expect(searches[0]!.max_batch).not.toBe(searches[2]!.max_batch); // each plan searched on its own GPU

    // What changed: each single change's effect as the engine measures it alone on the first plan.
    const b = attributions[1]!;
    const c = attributions[2]!;
    expect(await page.locator('[data-testid="what-changed-B"] .sentence').textContent()).toMatch(/^B saves [\d.]+\sGiB against A \(Activation checkpointing: Off → Non-reentrant\)\.$/);
    const cSentence = (await page.locator('[data-testid="what-changed-C"] .sentence').textContent())!;
    expect(cSentence).toMatch(/^C saves [\d.]+\sGiB against A, [\d.]+\sGiB of them from Activation checkpointing: Off → Non-reentrant\.$/);
    const deltas = await page.locator('[data-testid="what-changed-C"] li[data-change]').evaluateAll((lis) => lis.map((li) => [(li as HTMLElement).dataset.change, Number((li as HTMLElement).dataset.delta)]));
    expect(deltas).toEqual([
      ...c.changes.map((ch) => [ch.key, 'reserved_delta_bytes' in ch ? ch.reserved_delta_bytes : NaN]),
      ...(c.interaction_bytes !== 0 ? [['together', c.interaction_bytes]] : []),
    ]);
    expect(c.changes[0]!.key).toBe('training.activation_checkpointing');
    expect(b.reserved_difference_bytes).toBe(sims[1]!.peak_reserved_bytes - sims[0]!.peak_reserved_bytes);

    // The charts: one timeline with the three plans overlaid, the batch curves with each GPU's cap, three bars.
    expect(await page.locator('[data-testid="compare-timeline"] .legend li').allTextContents()).toEqual(expect.arrayContaining(PLANS.map((p, i) => `${'ABC'[i]} · ${p.name}`)));
    expect(await page.locator('[data-testid="compare-batch"] canvas').count()).toBe(1);
    expect(await page.locator('[data-testid="compare-breakdowns"] .bar-row .bar').count()).toBe(3);

    // Bad names: said beside the field, the name kept as typed.
    await page.locator('#comparison-name').fill('');
    expect(await page.locator('#comparison-name-problem').textContent()).toBe('Name the comparison to save it.');
    expect(await page.locator('[data-testid="compare-save"]').isDisabled()).toBe(true);
    await page.locator('#comparison-name').fill('x'.repeat(201));
    await page.locator('[data-testid="compare-save"]').click();
    await expect.poll(() => page.locator('#comparison-name-problem').textContent()).toBe('must be at most 200 characters');
    expect(await page.locator('#comparison-name').inputValue()).toBe('x'.repeat(201));
    expect(await page.locator('.comparison-item').count()).toBe(0);

    // Saved under a name, listed in the sidebar.
    await page.locator('#comparison-name').fill('Checkpointing and GPUs');
    expect(await page.locator('#comparison-name-problem').count()).toBe(0);
    await page.locator('[data-testid="compare-save"]').click();
    await page.locator('.comparison-item[data-comparison-name="Checkpointing and GPUs"]').waitFor();
    await expect.poll(() => page.locator('[data-testid="compare-save"]').isDisabled()).toBe(true);
    await screenshotWhole(page, 'compare-en');

    // Exported as a Markdown report (the exports' comparisonReport), its two charts as PNG beside it.
    const bridge = (app.served as ServedWithBridge).bridge;
    await page.locator('[data-testid="compare-export"]').click();
    await expect.poll(() => bridge.savedReports.length).toBe(1);
    const report = bridge.savedReports[0]!;
    expect(report.name).toBe('Checkpointing and GPUs.md');
    expect(report.text).toContain('# Checkpointing and GPUs');
    expect(report.text).toContain(cSentence);
    expect(report.images.map((i) => i.name)).toEqual(['Checkpointing and GPUs-timeline.png', 'Checkpointing and GPUs-batch-curves.png']);
    for (const image of report.images) expect([...image.bytes.slice(0, 4)]).toEqual([0x89, 0x50, 0x4e, 0x47]);
    expect(app.errors).toEqual([]);
  });

  test('a saved comparison reopens as it was; a plan edited since shows its current version and says so', async () => {
    const { page } = app;
    await page.locator('[data-testid="compare-close"]').click();
    await page.locator('#plan-title').waitFor();
    await page.reload();
    await page.locator('.comparison-item[data-comparison-name="Checkpointing and GPUs"] .open').click();
    await waitDone(page);
    expect(await page.locator('#comparison-name').inputValue()).toBe('Checkpointing and GPUs');
    expect(await page.locator('[data-testid="compare-numbers"] thead .name').allTextContents()).toEqual(PLANS.map((p) => p.name));
    expect(await values(page, 'peak_reserved')).toEqual(sims.map((s) => s.peak_reserved_bytes));
    expect(await page.locator('[data-testid^="column-status-"]').count()).toBe(0);

    // Plan B edited after the comparison was saved: batch 16.
    const edited = { ...PLANS[1]!.plan, training: { ...PLANS[1]!.plan.training, batch_size: 16 } };
    await api(page)(async ({ id, plan }) => {
      const memplan = (window as unknown as { memplan: MemplanApi }).memplan;
      await memplan.plans.save({ id, name: 'GPT-2, checkpointing, batch 16', plan });
    }, { id: ids[1]!, plan: edited });
    await page.locator('[data-testid="compare-close"]').click();
    await page.locator('.comparison-item[data-comparison-name="Checkpointing and GPUs"] .open').click();
    await waitDone(page);
    await expect.poll(() => page.locator('[data-testid="column-status-B"]').getAttribute('data-status')).toBe('edited');
    expect(await page.locator('[data-testid="column-status-B"]').textContent()).toContain('Edited since this comparison was saved');
    const editedPlan = parsePlan(edited as PlanInput, { catalog });
    expect((await values(page, 'peak_reserved'))[1]).toBe(simulate(editedPlan, { device: device(editedPlan) }).peak_reserved_bytes);
    expect(await page.locator('[data-testid="compare-settings"] tr[data-setting="training.batch_size"]').getAttribute('data-differs')).toBe('true');
    // Saving again compares the current versions: the note goes.
    await page.locator('[data-testid="compare-save"]').click();
    await expect.poll(() => page.locator('[data-testid^="column-status-"]').count()).toBe(0);

    // Deleted from the sidebar, and back with Undo from the toast, its plans in their order, after a reload too.
    const saved = page.locator('.comparison-item[data-comparison-name="Checkpointing and GPUs"]');
    await saved.hover();
    await saved.locator('button[aria-label^="Delete comparison"]').click();
    await expect.poll(() => saved.count()).toBe(0);
    await page.locator('.toast', { hasText: 'Deleted the comparison' }).locator('button', { hasText: 'Undo' }).click();
    await page.locator('.toast', { hasText: 'Restored the comparison “Checkpointing and GPUs”' }).waitFor();
    await page.reload();
    await saved.locator('.open').click();
    await waitDone(page);
    expect(await page.locator('[data-testid="compare-numbers"] thead .name').allTextContents()).toEqual([PLANS[0]!.name, 'GPT-2, checkpointing, batch 16', PLANS[2]!.name]);
    expect(app.errors).toEqual([]);
  });

  test('in Chinese', async () => {
    // Back to the plans as first saved, for the screenshot.
    await api(app.page)(async ({ id, plan, name }) => {
      const memplan = (window as unknown as { memplan: MemplanApi }).memplan;
      await memplan.plans.save({ id, name, plan });
    }, { id: ids[1]!, plan: PLANS[1]!.plan, name: PLANS[1]!.name });
    const zh = await launchApp({ served: app.served, locale: 'zh-CN', height: 1000 });
    try {
      const { page } = zh;
      await page.locator('.comparison-item[data-comparison-name="Checkpointing and GPUs"] .open').click();
      await waitDone(page);
      expect(await page.locator('[data-testid="compare-save"]').textContent()).toContain('保存对比');
      expect(await page.locator('[data-testid="what-changed-C"] .sentence').textContent()).toMatch(/^C 比 A 节省 [\d.]+\sGiB，其中 [\d.]+\sGiB 来自梯度检查点：关闭 → 非重入。$/);
      expect(await page.locator('[data-testid="compare-numbers"] tr[data-row="peak_reserved"] th').textContent()).toContain('峰值');
      // Plan B was saved again (its edit undone) after the comparison: the column says so, in Chinese.
      expect(await page.locator('[data-testid="column-status-B"]').textContent()).toContain('保存此对比后该方案已被修改');
      await screenshotWhole(page, 'compare-zh-CN');
      expect(zh.errors).toEqual([]);
    } finally {
      await zh.close();
    }
  });

  test('a LoRA fine-tune beside the full fine-tune of the same model: the LoRA row is the difference, and what changed names it', async () => {
    const llama = { model_type: 'llama', hidden_size: 256, intermediate_size: 688, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 4, vocab_size: 4096 };
    const base = { format: 'memplan.plan', version: 1, model: { hf_config: llama }, training: { batch_size: 4, seq_len: 256, precision: 'amp_bf16' }, gpu: { name: 'h100-sxm' } };
    const loraPlans = [
      { name: 'Small Llama, full fine-tune', plan: base },
      { name: 'Small Llama, LoRA', plan: { ...base, training: { ...base.training, lora: { r: 16, alpha: 32, dropout: 0.05, target_modules: ['q_proj', 'v_proj'] } } } },
    ];
    await api(app.page)(async (plans) => {
      const memplan = (window as unknown as { memplan: MemplanApi }).memplan;
      for (const p of plans) await memplan.plans.save({ name: p.name, plan: p.plan });
    }, loraPlans);
    const [full, lora] = loraPlans.map((p) => parsePlan(p.plan as PlanInput, { catalog }));
    const saved = attribute(full!, lora!, { device }).reserved_difference_bytes;
    expect(saved).toBeLessThan(0);
    for (const [locale, label, off, sentence] of [
      ['en-US', 'LoRA adapters (PEFT)', 'Off', /^B saves [\d.]+\s[GM]iB against A \(LoRA adapters \(PEFT\): Off → r 16, alpha 32, dropout 0\.05, q_proj, v_proj\)\.$/],
      ['zh-CN', 'LoRA 适配器（PEFT）', '关闭', /^B 比 A 节省 [\d.]+\s[GM]iB（LoRA 适配器（PEFT）：关闭 → r 16，alpha 32，dropout 0\.05，q_proj, v_proj）。$/],
    ] as const) {
      const window = await launchApp({ served: app.served, locale, height: 1000 });
      try {
        const { page } = window;
        for (const p of loraPlans) await page.locator(`.plan-item[data-plan-name="${p.name}"] .pick input`).check();
        await page.locator('[data-testid="compare-selected"]').click();
        await waitDone(page);
        const rows = page.locator('[data-testid="compare-settings"] tbody tr[data-differs="true"]');
        expect(await rows.evaluateAll((trs) => trs.map((r) => (r as HTMLElement).dataset.setting))).toEqual(['training.lora']);
        expect(await rows.locator('th').textContent()).toBe(label);
        expect((await rows.locator('td').allTextContents()).map((t) => t.trim())).toEqual([off, locale === 'en-US' ? 'r 16, alpha 32, dropout 0.05, q_proj, v_proj' : 'r 16，alpha 32，dropout 0.05，q_proj, v_proj']);
        expect(await page.locator('[data-testid="what-changed-B"] .sentence').textContent()).toMatch(sentence);
        // the one change is the whole difference: the engine's, to the byte
        expect(Number(await cells(page, 'peak_reserved').nth(1).locator('.diff').getAttribute('data-diff'))).toBe(saved);
        await screenshotWhole(page, `compare-lora-${locale === 'en-US' ? 'en' : 'zh-CN'}`);
        expect(window.errors).toEqual([]);
      } finally {
        await window.close();
      }
    }
  });

  test('a change whose step PyTorch fails alone says so, in both languages (a regression head moved onto bf16 weights)', async () => {
    const bert = { model_type: 'bert', architectures: ['BertForSequenceClassification'], num_labels: 1, hidden_size: 128, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 2, vocab_size: 2048, max_position_embeddings: 128 };
    const llama = { model_type: 'llama', hidden_size: 128, intermediate_size: 344, num_hidden_layers: 2, num_attention_heads: 2, num_key_value_heads: 2, vocab_size: 2048, max_position_embeddings: 128 };
    const plansHere = [
      { name: 'Small BERT regression, AMP bf16', plan: { format: 'memplan.plan', version: 1, model: { hf_config: bert }, training: { batch_size: 4, seq_len: 64, precision: 'amp_bf16' }, gpu: { name: 'h100-sxm' } } },
      { name: 'Small Llama, bf16 weights', plan: { format: 'memplan.plan', version: 1, model: { hf_config: llama }, training: { batch_size: 4, seq_len: 64, precision: 'bf16' }, gpu: { name: 'h100-sxm' } } },
    ];
    await api(app.page)(async (plans) => {
      const memplan = (window as unknown as { memplan: MemplanApi }).memplan;
      for (const p of plans) await memplan.plans.save({ name: p.name, plan: p.plan });
    }, plansHere);
    const [regression, lm] = plansHere.map((p) => parsePlan(p.plan as PlanInput, { catalog }));
    const expected = attribute(regression!, lm!, { device });
    const modelDelta = expected.changes.find((c) => c.key === 'model')!;
    expect(modelDelta).toMatchObject({ reserved_delta_bytes: expect.any(Number) });
    expect(expected.changes.find((c) => c.key === 'training.precision')).toMatchObject({ reason_id: 'fails_in_pytorch' });
    for (const [locale, words] of [
      ['en-US', /^alone, this change makes PyTorch fail the step: training\.precision: a regression head \(MSELoss\) on a bfloat16 model fails in PyTorch/],
      ['zh-CN', /^单独应用此改动时 PyTorch 会报错：training\.precision: .*"Found dtype Float but expected BFloat16"/],
    ] as const) {
      const window = await launchApp({ served: app.served, locale, height: 1000 });
      try {
        const { page } = window;
        for (const p of plansHere) await page.locator(`.plan-item[data-plan-name="${p.name}"] .pick input`).check();
        await page.locator('[data-testid="compare-selected"]').click();
        await waitDone(page);
        const changes = page.locator('[data-testid="what-changed-B"] .details');
        const precision = changes.locator('li[data-change="training.precision"]');
        expect(await precision.locator('[data-reason]').getAttribute('data-reason')).toBe('fails_in_pytorch');
        expect((await precision.locator('[data-reason]').textContent())!.trim()).toMatch(words);
        // the model change alone was simulated: the engine's delta, to the byte
        expect(await changes.locator('li[data-change="model"]').getAttribute('data-delta')).toBe(String('reserved_delta_bytes' in modelDelta ? modelDelta.reserved_delta_bytes : NaN));
        await screenshotWhole(page, `compare-fails-in-pytorch-${locale === 'en-US' ? 'en' : 'zh-CN'}`);
        expect(window.errors).toEqual([]);
      } finally {
        await window.close();
      }
    }
  });
});
