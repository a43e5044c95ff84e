/** The memplan command as a user runs it: exit codes, messages, JSON. */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { gzipSync } from 'fflate';
import { gpuListSchema, presetListSchema, replayResultSchema } from '../../engine/index.ts';

const root = new URL('../../', import.meta.url).pathname;

function memplan(...args: string[]) {
  const r = spawnSync(process.execPath, [join(root, 'cli/memplan.ts'), ...args], { encoding: 'utf8' });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const scratch = mkdtempSync(join(tmpdir(), 'memplan-cli-'));

describe('memplan', () => {
  it('prints help and the version', () => {
    const help = memplan('--help');
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('replay');
    expect(memplan('--version').stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
    expect(memplan('replay', '--help').stdout).toContain('--memory-limit-bytes');
  });

  it('exits 2 with one line for an unknown command or option', () => {
    for (const args of [['frobnicate'], ['replay', '--bogus', 'x']]) {
      const r = memplan(...args);
      expect(r.code).toBe(2);
      expect(r.stderr.trim().split('\n')).toHaveLength(1);
      expect(r.stderr).not.toMatch(/\bat .*\.ts:\d+/); // no stack trace
    }
  });

  it('exits 2 naming the file when it is missing, not a pickle, or truncated', () => {
    const missing = memplan('replay', join(scratch, 'nope.pickle'));
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no such file');

    const text = join(scratch, 'notes.txt');
    writeFileSync(text, 'hello, this is not a snapshot');
    const notPickle = memplan('replay', text);
    expect(notPickle.code).toBe(2);
    expect(notPickle.stderr).toMatch(/snapshot: .*byte 0/);

    const truncated = join(scratch, 'truncated.pickle');
    writeFileSync(truncated, new Uint8Array([0x80, 0x04, 0x95, 0x10, 0, 0, 0, 0, 0, 0, 0, 0x7d]));
    const t = memplan('replay', truncated);
    expect(t.code).toBe(2);
    expect(t.stderr).toMatch(/snapshot: byte \d+/);

    const badGzip = join(scratch, 'bad.pickle.gz');
    writeFileSync(badGzip, gzipSync(new Uint8Array([1, 2, 3])).slice(0, 12));
    const g = memplan('replay', badGzip);
    expect(g.code).toBe(2);
    expect(g.stderr).toContain('gzip');
  });

  it('exits 2 for a JSON file that is not a snapshot, and for a bad --memory-limit-bytes', () => {
    const json = join(scratch, 'other.json');
    writeFileSync(json, JSON.stringify({ hello: 1 }));
    const r = memplan('replay', json);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('snapshot.device_traces');
    const cap = memplan('replay', json, '--memory-limit-bytes', '12G'); // G alone: GB or GiB?
    expect(cap.code).toBe(2);
    expect(cap.stderr).toContain('--memory-limit-bytes');
    // a negative number is the flag's bad value, not an unknown option (issue 13)
    const negative = memplan('replay', json, '--memory-limit-bytes', '-5');
    expect(negative.code).toBe(2);
    expect(negative.stderr.trim()).toBe('memplan: --memory-limit-bytes: expected a size such as 80GiB, 80GB, 81920MiB or a whole number of bytes, got "-5"');
  });

  it('replays a snapshot given as JSON and prints one JSON object', () => {
    const MiB = 1_048_576;
    const addr = 0x7f0000000000;
    const snapshot = {
      segments: [],
      allocator_settings: {},
      external_annotations: [],
      device_traces: [
        [
          { action: 'segment_alloc', addr, size: 20 * MiB, stream: 0 },
          { action: 'alloc', addr, size: 4 * MiB, stream: 0 },
          { action: 'alloc', addr: addr + 4 * MiB, size: 3 * MiB, stream: 0 },
          { action: 'free_requested', addr, size: 4 * MiB, stream: 0 },
          { action: 'free_completed', addr, size: 4 * MiB, stream: 0 },
        ],
      ],
    };
    const file = join(scratch, 'tiny.json');
    writeFileSync(file, JSON.stringify(snapshot));
    const r = memplan('replay', file, '--json');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.events).toBe(5);
    expect(out.segment_event_mismatches).toBe(0);
    expect(out.first_mismatch).toBeNull();
    expect(out.real_peak_reserved_bytes).toBe(20 * MiB);
    expect(out.sim_peak_reserved_bytes).toBe(20 * MiB);
    expect(out.sim_peak_allocated_bytes).toBe(7 * MiB);
    expect(replayResultSchema.parse(out).kind).toBe('replay');
    expect(out.real_oom).toBe(false);
    expect(out.sim_oom).toBe(false);
  });

  it('reports the first segment event that differs', () => {
    const MiB = 1_048_576;
    const file = join(scratch, 'differs.json');
    // A 4 MiB request takes a 20 MiB segment in PyTorch; this trace claims 4 MiB.
    writeFileSync(file, JSON.stringify({ device_traces: [[
      { action: 'segment_alloc', addr: 0x7f0000000000, size: 4 * MiB, stream: 0 },
      { action: 'alloc', addr: 0x7f0000000000, size: 4 * MiB, stream: 0 },
    ]] }));
    const out = JSON.parse(memplan('replay', file, '--json').stdout);
    expect(out.segment_event_mismatches).toBe(1);
    expect(out.first_mismatch).toEqual({ event_index: 1, real: `segment_alloc of ${4 * MiB} bytes`, simulated: `segment_alloc of ${20 * MiB} bytes` });
  });

  it('is built into dist/ by npm ci (the bin users run)', () => {
    expect(existsSync(join(root, 'dist/cli/memplan.js'))).toBe(true);
    const r = spawnSync(process.execPath, [join(root, 'dist/cli/memplan.js'), '--version'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
  });

  it('built, answers as the source does, with its worker threads too (the bundle starts them from dist/cli/)', () => {
    // --gpu all starts the workers whatever a trial takes (cli/engine-workers.ts)
    const args = ['max-batch', join(root, 'examples/mlp-fp16.plan.json'), '--gpu', 'all', '--no-advice', '--json'];
    const fromSource = memplan(...args);
    expect(fromSource.code).toBe(0);
    const env = { ...process.env, MEMPLAN_DEBUG: '1' }; // a worker that stops says so
    for (const threads of ['1', '2']) {
      const r = spawnSync(process.execPath, [join(root, 'dist/cli/memplan.js'), ...args, '--threads', threads], { encoding: 'utf8', env });
      expect(r.stderr, threads).toBe('');
      expect(r.status, threads).toBe(0);
      expect(JSON.parse(r.stdout), threads).toEqual(JSON.parse(fromSource.stdout));
    }
    // Without the worker's bundle the workers stop (and the answer is the same): the run above used them.
    const copy = join(scratch, 'dist-without-worker');
    cpSync(join(root, 'dist'), copy, { recursive: true });
    rmSync(join(copy, 'cli/engine-worker.js'));
    const r = spawnSync(process.execPath, [join(copy, 'cli/memplan.js'), ...args, '--threads', '2'], { encoding: 'utf8', env });
    expect(r.stderr).toMatch(/a worker thread stopped/);
    expect(JSON.parse(r.stdout)).toEqual(JSON.parse(fromSource.stdout));
  }, 60_000);
});

describe('memplan simulate and max-batch', () => {
  const plan = join(root, 'examples/mlp-fp16.plan.json');

  it('simulate --json prints the peaks in whole bytes and the breakdown', () => {
    const r = memplan('simulate', plan, '--json');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(Number.isSafeInteger(out.peak_allocated_bytes)).toBe(true);
    expect(out.peak_reserved_bytes).toBeGreaterThanOrEqual(out.peak_allocated_bytes);
    expect(out.breakdown_at_peak.parameter).toBeGreaterThan(0);
    // the plan's 3 steps at least, then on until the allocator's state repeats (the steady state: no not_steady note)
    expect(out.steps.length).toBeGreaterThanOrEqual(3);
    expect(out.notes.map((n: { id: string }) => n.id)).not.toContain('not_steady');
    expect(out.steps.at(-1).peak_reserved_bytes).toBeLessThanOrEqual(out.steps.at(-2).peak_reserved_bytes);
  });

  it('simulate takes a preset, and a Hugging Face config.json as the Hub ships it', () => {
    // The example GPT-2 plan is the calibration run gpt2_small_amp_bf16_adamw: the H100 measured these peaks over
    // 3 steps, which are already its steady state.
    const gpt2 = memplan('simulate', join(root, 'examples/gpt2-config-json.plan.json'), '--json');
    expect(gpt2.code, gpt2.stderr).toBe(0);
    const measured = JSON.parse(readFileSync(join(root, 'test/fixtures/calibration/gpt2_small_amp_bf16_adamw.json'), 'utf8'));
    const out = JSON.parse(gpt2.stdout);
    expect(out.peak_allocated_bytes).toBe(measured.peak_allocated_bytes);
    expect(out.peak_reserved_bytes).toBe(measured.peak_reserved_bytes);
    const llama = memplan('simulate', join(root, 'examples/llama-3-8b-bf16.plan.json'), '--json');
    expect(llama.code, llama.stderr).toBe(0);
    expect(JSON.parse(llama.stdout).model.parameter_count).toBe(8_030_261_248);
    const resnet = memplan('simulate', join(root, 'examples/resnet50-amp.plan.json'));
    expect(resnet.code, resnet.stderr).toBe(0);
    expect(resnet.stdout).toContain('25,557,032 parameters');
  });

  it('presets lists the model presets', () => {
    const r = memplan('presets', '--json');
    expect(r.code).toBe(0);
    const ids = presetListSchema.parse(JSON.parse(r.stdout)).presets.map((p) => p.id);
    expect(ids).toEqual(expect.arrayContaining(['gpt2-xl', 'bert-large', 'llama-3-70b', 'mistral-7b', 'qwen2.5-7b', 'resnet152', 'vit_l_16']));
  });

  it('simulate names the field of a bad plan and exits 2', () => {
    const bad = join(scratch, 'bad-plan.json');
    writeFileSync(bad, JSON.stringify({ format: 'memplan.plan', version: 1, model: { layers: [{ type: 'relu' }], input_features: 8 }, training: { batch_size: -3 } }));
    const r = memplan('simulate', bad);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toBe(`memplan: ${bad}: training.batch_size: must be a positive integer, got -3`);
    writeFileSync(bad, '{ not json');
    expect(memplan('simulate', bad).stderr).toContain('not valid JSON');
  });

  it('names the file, or the flag, of a field the engine refuses while simulating (a script running many plans sees which)', () => {
    const qlora = join(scratch, 'qlora-plan.json');
    writeFileSync(qlora, JSON.stringify({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { batch_size: 1, seq_len: 128, precision: 'bf16', lora: { r: 8, alpha: 16, target_modules: ['q_proj'], quantization: '8bit' } } }));
    for (const command of ['simulate', 'max-batch']) {
      const r = memplan(command, qlora);
      expect(r.code, r.stderr).toBe(2);
      expect(r.stderr.trim()).toBe(`memplan: ${qlora}: training.lora.quantization: an 8-bit base (QLoRA) needs bitsandbytes, whose memory is not modelled; plan the bf16 base instead`);
    }
    const window = join(scratch, 'window-plan.json');
    writeFileSync(window, JSON.stringify({ format: 'memplan.plan', version: 1, model: { hf_config: { model_type: 'mistral', hidden_size: 256, intermediate_size: 512, num_hidden_layers: 2, num_attention_heads: 4, num_key_value_heads: 2, vocab_size: 1000, sliding_window: 256 } }, training: { batch_size: 1, seq_len: 128, precision: 'fp32' } }));
    expect(memplan('simulate', window, '--no-advice').code).toBe(0);
    const r = memplan('simulate', window, '--seq-len', '256');
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/^memplan: --seq-len \(training\.seq_len\): reaches the sliding window: /);
  });

  it('simulate says what trains, as PEFT\'s print_trainable_parameters() prints it; nothing more for a full fine-tune', () => {
    const plan = join(scratch, 'all-linear-plan.json');
    const training = { batch_size: 1, seq_len: 64, precision: 'bf16' };
    writeFileSync(plan, JSON.stringify({ format: 'memplan.plan', version: 1, name: 'TinyLlama all-linear', model: { preset: 'tinyllama-1.1b' }, training: { ...training, lora: { r: 8, alpha: 16, target_modules: 'all-linear' } } }));
    let r = memplan('simulate', plan, '--no-advice');
    expect(r.code, r.stderr).toBe(0);
    // 22 layers of q, k, v, o, gate, up, down: 8 x (2048+2048, 2048+256, 2048+256, 2048+2048, 3 x (2048+5632)) each
    expect(r.stdout.split('\n')[0]).toBe('TinyLlama all-linear: 1,106,356,224 parameters (2.07 GiB), 6,307,840 trainable (trainable%: 0.5701), on NVIDIA H100 80GB HBM3');
    expect(JSON.parse(memplan('simulate', plan, '--json', '--no-advice').stdout).model.trainable_parameter_count).toBe(6_307_840);
    writeFileSync(plan, JSON.stringify({ format: 'memplan.plan', version: 1, name: 'TinyLlama', model: { preset: 'tinyllama-1.1b' }, training }));
    r = memplan('simulate', plan, '--no-advice');
    expect(r.stdout.split('\n')[0]).toBe('TinyLlama: 1,100,048,384 parameters (2.05 GiB) on NVIDIA H100 80GB HBM3');
  });

  it('refuses a freeze that leaves nothing to train (PyTorch: "element 0 of tensors does not require grad"), at training.freeze', () => {
    const frozen = join(scratch, 'frozen-plan.json');
    const training = { batch_size: 1, seq_len: 64, precision: 'bf16' };
    writeFileSync(frozen, JSON.stringify({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { ...training, freeze: ['*'] } }));
    let r = memplan('simulate', frozen);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr.trim()).toBe(`memplan: ${frozen}: training.freeze: this pattern freezes every parameter: nothing would train (loss.backward() raises "element 0 of tensors does not require grad")`);
    writeFileSync(frozen, JSON.stringify({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { ...training, lora: { r: 8, alpha: 16, target_modules: ['q_proj'] }, freeze: ['*lora_A*', '*lora_B*'] } }));
    r = memplan('simulate', frozen);
    expect(r.code, r.stderr).toBe(2);
    expect(r.stderr).toMatch(/training\.freeze: these patterns freeze every LoRA adapter \(with LoRA the adapters are all that trains\): nothing would train/);
    // freezing all but the head trains the head
    writeFileSync(frozen, JSON.stringify({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { ...training, freeze: ['model.*'] } }));
    expect(memplan('simulate', frozen, '--no-advice').code).toBe(0);
    // a frozen embedding under reentrant checkpointing: the blocks train nothing, and the answer says so
    writeFileSync(frozen, JSON.stringify({ format: 'memplan.plan', version: 1, model: { preset: 'tinyllama-1.1b' }, training: { ...training, activation_checkpointing: 'reentrant', freeze: ['model.embed_tokens.*'] } }));
    r = memplan('simulate', frozen, '--no-advice');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Note: With reentrant checkpointing, the input of 22 checkpointed blocks needs no gradient .*model\.enable_input_require_grads\(\)/m);
  });

  it('simulate says when the model itself does not fit: out of memory while loading it, no step run', () => {
    const r = memplan('simulate', 'examples/llama-3-8b-bf16.plan.json', '--gpu', 't4', '--no-advice');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^OUT OF MEMORY while loading the model \(model\.to\("cuda"\)\): CUDA out of memory\./m);
    expect(r.stdout).toMatch(/^max_memory_allocated\(\) +[\d.]+ GiB +\(while loading the model\)$/m);
    expect(r.stdout).not.toContain('Per step');
  });

  it('simulate says what a plan that runs out of memory needs with no cap', () => {
    const r = memplan('simulate', 'examples/llama-3-8b-bf16.plan.json', '--gpu', 'a100-40gb', '--no-advice');
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^OUT OF MEMORY in step \d/m);
    const needed = /^Needs ([\d.]+) GiB reserved at this batch with no cap \(simulated on this GPU with unbounded memory\)$/m.exec(r.stdout);
    expect(needed, r.stdout).not.toBeNull();
    const out = JSON.parse(memplan('simulate', 'examples/llama-3-8b-bf16.plan.json', '--gpu', 'a100-40gb', '--no-advice', '--json').stdout) as { needed_bytes: number };
    expect(Number(needed![1])).toBeCloseTo(out.needed_bytes / 2 ** 30, 2);
  });

  it('max-batch --json finds the largest batch under a cap and lists its trials', () => {
    const r = memplan('max-batch', plan, '--memory-limit-bytes', String(2 ** 31), '--json');
    expect(r.code).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.max_batch).toBeGreaterThan(0);
    expect(out.trials.some((t: { batch: number; fits: boolean }) => t.batch === out.max_batch && t.fits)).toBe(true);
    expect(out.trials.some((t: { batch: number; fits: boolean }) => t.batch === out.max_batch + 1 && !t.fits)).toBe(true);
    expect(out.recommendation.batch).toBeLessThanOrEqual(out.max_batch);
  });

  it('gpus lists the catalog, the H100 with its measured memory', () => {
    const r = memplan('gpus', '--json');
    expect(r.code).toBe(0);
    const gpus = gpuListSchema.parse(JSON.parse(r.stdout)).gpus;
    expect(gpus.length).toBeGreaterThanOrEqual(15);
    const h100 = gpus.find((g) => g.id === 'h100-sxm')!;
    expect(h100.total_memory_source).toBe('measured');
    // what the caveat gpu_figures_not_measured points at: how each figure is known, the context's too
    expect(h100.non_pytorch_source).toBe('measured');
    expect(gpus.find((g) => g.id === 'h100-pcie')!.non_pytorch_source).toBe('unconfirmed');
    expect(memplan('gpus').stdout).toMatch(/^h100-sxm +NVIDIA H100 80GB HBM3 .*\(memory measured, context measured\)$/m);
  });

  it('max-batch takes a GPU of the catalog by its torch name and rejects unknown ones', () => {
    const ok = memplan('max-batch', plan, '--gpu', 'nvidia h100 80gb hbm3', '--json');
    expect(ok.code).toBe(0);
    const bad = memplan('max-batch', plan, '--gpu', 'h100-sxn');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^memplan: --gpu: unknown GPU "h100-sxn"/);
    expect(bad.stderr).toContain('h100-sxm');
  });

  it('stops quietly when the reader closes the pipe (memplan ... | head)', async () => {
    const child = spawn(process.execPath, [join(root, 'cli/memplan.ts'), 'simulate', join(root, 'examples/gpt2-config-json.plan.json'), '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.destroy(); // the reader is gone before memplan writes: its write fails with EPIPE
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(stderr).toBe('');
    expect(code).toBe(0);
  });
});
