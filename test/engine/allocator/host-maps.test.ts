/**
 * What Note [cudaMalloc placement] (engine/allocator/device-memory.ts) says of the host's mappings, checked against
 * /proc/self/maps read on the H100 while three calibration plans loaded and trained (test/fixtures/device/
 * h100_host_maps.json, resources/measure/probe_host_maps.py): where the CPU copy of the model lies, and where the
 * driver's reservations land as `.to("cuda")` frees it. memplan does not model these mappings; these are the facts
 * that say why mixtral_4l_amp_bf16_ckpt's segments land where the rule does not put them, and the dense models
 * loaded with from_pretrained of test/engine/models/pretrained-placement.test.ts.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

interface Reading {
  label: string;
  index?: number;
  bytes?: number;
  ptr?: number;
  added: string[];
  removed: string[];
}
const fixture = JSON.parse(readFileSync(new URL('../../fixtures/device/h100_host_maps.json', import.meta.url), 'utf8')) as { runs: Record<string, { readings: Reading[] }> };

interface Mapping {
  start: number;
  end: number;
  perms: string;
  path: string;
}
const mapping = (line: string): Mapping => {
  const [range, perms, path = ''] = line.split(' ');
  const [start, end] = range!.split('-').map((h) => Number.parseInt(h, 16)) as [number, number];
  return { start, end, perms: perms!, path };
};
const MiB = 2 ** 20;

function run(name: string) {
  const readings = fixture.runs[name]!.readings;
  const at = (label: string, index?: number) => readings.find((r) => r.label === label && r.index === index)!;
  /** The driver's own range, reserved at torch.cuda.init() (8 GiB and more, high in the address space). */
  const driver = at('cuda_init').added.map(mapping).find((m) => m.perms === '---p' && m.end - m.start >= 8 * 1024 * MiB && m.start > 2 ** 40)!;
  /** Reservations the driver made while the tensor with this index moved (seen before the next one moves). */
  const reservedBefore = (index: number) => at('move', index).added.map(mapping).filter((m) => m.perms === '---p');
  return { readings, at, driver, reservedBefore };
}

describe('the host’s mappings around the driver’s reservations (H100)', () => {
  it('from_config: the CPU copy of the model is one run of mmaps above the driver’s range, first tensor highest', () => {
    const { at, driver, readings } = run('mixtral_4l_amp_bf16_ckpt_config');
    const cpu = at('built').added.map(mapping).find((m) => m.perms === 'rw-p' && m.end - m.start > 1500 * MiB)!;
    expect(cpu.start).toBeGreaterThan(driver.end);
    const moved = readings.filter((r) => r.label === 'move' && r.bytes! >= 4 * MiB);
    for (const r of moved) expect(r.ptr!).toBeGreaterThanOrEqual(cpu.start);
    for (const r of moved) expect(r.ptr!).toBeLessThan(cpu.end);
    // created top-down in order: each mmapped tensor lies below the one before (the last, lm_head, lowest)
    const ptrs = moved.map((r) => r.ptr!);
    expect(ptrs).toEqual([...ptrs].sort((a, b) => b - a));
  });

  it('Mixtral from_config: the 224 MiB experts find no room in the freed gap and go below; the 112 MiB after them land above', () => {
    const { driver, reservedBefore, at } = run('mixtral_4l_amp_bf16_ckpt_config');
    const cpu = at('built').added.map(mapping).find((m) => m.perms === 'rw-p' && m.end - m.start > 1500 * MiB)!;
    // index 6 is layer 0's gate_up_proj (224 MiB), 7 its down_proj (112 MiB)
    expect(at('move', 6).bytes).toBe(224 * MiB);
    expect(at('move', 7).bytes).toBe(112 * MiB);
    const forGateUp = reservedBefore(7);
    expect(forGateUp.length).toBeGreaterThan(0);
    for (const m of forGateUp) expect(m.end).toBeLessThanOrEqual(driver.start);
    const forDown = reservedBefore(8);
    expect(forDown).toHaveLength(1);
    expect(forDown[0]!.end - forDown[0]!.start).toBe(128 * MiB); // 112 MiB rounded up to the 32 MiB reservations
    expect(forDown[0]!.start).toBeGreaterThan(driver.end);
    expect(forDown[0]!.end).toBeLessThanOrEqual(cpu.end + 32 * MiB);
  });

  it('TinyLlama from_config: every reservation while the model moves fills the freed gap above the driver’s range', () => {
    const { readings, driver } = run('tinyllama_4l_amp_bf16_ckpt_fused_config');
    const during = readings.filter((r) => r.label === 'move' && r.index! >= 2).flatMap((r) => r.added.map(mapping).filter((m) => m.perms === '---p'));
    expect(during.length).toBeGreaterThan(5);
    for (const m of during) expect(m.start).toBeGreaterThan(driver.end);
  });

  it('from_pretrained: unconverted tensors are views of the mmapped checkpoint; the experts transformers fuses are not', () => {
    const { at, readings } = run('mixtral_4l_amp_bf16_ckpt_pretrained');
    const file = at('built').added.map(mapping).find((m) => m.path.endsWith('model.safetensors'))!;
    expect(file).toBeDefined();
    const inFile = (r: Reading) => r.ptr! >= file.start && r.ptr! < file.end;
    const moves = readings.filter((r) => r.label === 'move');
    expect(inFile(moves[0]!)).toBe(true); // the embedding
    const experts = moves.filter((r) => r.bytes === 224 * MiB || r.bytes === 112 * MiB);
    expect(experts).toHaveLength(8);
    for (const r of experts) expect(inFile(r)).toBe(false);
    // the file is unmapped whole once the last view moved
    expect(at('moved').removed.map(mapping).some((m) => m.path.endsWith('model.safetensors'))).toBe(true);
  });

  it('from_pretrained of a dense model: the driver\'s range sits right below the mapped checkpoint, and the reservations pass over both once the room above the file is gone', () => {
    // Qwen2.5 1.5B with half its layers frozen, at its largest batch under 20 GiB (the boundary suite's case): memplan
    // asks for the same blocks in the same order, and its peaks differ where these reservations land
    // (test/engine/models/pretrained-placement.test.ts)
    const { at, driver, readings } = run('qwen2_5_1_5b_bf16_freeze_half_s1024_b4_cap20g_pretrained');
    const file = at('built').added.map(mapping).find((m) => m.path.endsWith('model.safetensors'))!;
    expect(file.end - file.start).toBeGreaterThan(2900 * MiB); // 1.54 billion bf16 values
    expect(driver.end).toBe(file.start);
    // each reservation made while the model moves: the lowest address of the driver's ---p mappings it added
    const lowest = readings
      .filter((r) => r.label === 'move')
      .flatMap((r) => r.added.map(mapping).filter((m) => m.perms === '---p' && m.start > 2 ** 40))
      .map((m) => m.start);
    expect(lowest.length).toBeGreaterThan(50);
    const above = lowest.filter((a) => a > file.end);
    const below = lowest.filter((a) => a < driver.start);
    expect(above.length + below.length).toBe(lowest.length);
    // first above the file, in the room the context's range left down to it ...
    expect(lowest.indexOf(below[0]!)).toBe(above.length);
    const lastAbove = Math.min(...above);
    expect(lastAbove - file.end).toBeLessThan(64 * MiB); // less than a reservation and its alignment: passed over
    // ... then directly below the driver's range, which they extend downward
    expect(below[0]).toBe(driver.start - 32 * MiB);
    // the file is unmapped once the last of its views moved, before the model's buffers do
    const unmapped = readings.find((r) => r.removed.map(mapping).some((m) => m.path.endsWith('model.safetensors')))!;
    expect(unmapped.label).toBe('move');
    expect(unmapped.bytes).toBeLessThan(MiB);
  });
});
