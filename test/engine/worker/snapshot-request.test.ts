/**
 * A snapshot through the worker protocol as the app's snapshot view sends it: reading in steps with progress by
 * stage, cancel while the pickle is still being parsed, the file's bytes given back, a malformed pickle reported
 * with its byte offset, and the segments at the peak agreeing with the replay's own peak.
 */
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import catalog from '../../../resources/gpus.json' with { type: 'json' };
import { createEngineHost, engineAnswerSchema, readSnapshotBytes, replay, type EngineAnswer } from '../../../engine/index.ts';
import { maybeGunzipSteps } from '../../../engine/snapshot/gzip.ts';
import { syntheticSnapshot } from '../snapshot/synthetic-snapshot.ts';

const fixture = (name: string) => new Uint8Array(readFileSync(new URL(`../../fixtures/traces/${name}`, import.meta.url)));
const buffer = (b: Uint8Array) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;

function setup() {
  const host = createEngineHost({ catalog, convTable: async () => ({}) });
  const answers: EngineAnswer[] = [];
  const post = (a: EngineAnswer) => {
    const cloned = structuredClone(a);
    const parsed = engineAnswerSchema.safeParse(cloned);
    expect(parsed.success, JSON.stringify(parsed.error?.issues.slice(0, 3))).toBe(true);
    answers.push(cloned);
  };
  return { host, answers, post };
}

describe('a snapshot through the worker', () => {
  it('reads a large gzipped snapshot in stages with rising progress, and gives the bytes back when asked', async () => {
    const { bytes, events } = syntheticSnapshot({ rounds: 3000 }); // 576,001 events, 35 MB of pickle
    const gz = new Uint8Array(gzipSync(bytes, { level: 1 }));
    const { host, answers, post } = setup();
    await host.handle({ kind: 'replay', id: 1, bytes: buffer(gz), what_if: ['expandable_segments:True'], return_bytes: true }, post);
    const progress = answers.filter((a) => a.kind === 'progress');
    const stages = [...new Set(progress.map((p) => p.stage))];
    expect(stages).toEqual(['decompress', 'parse', 'trace', 'replay', 'segments', 'what_if']);
    const fractions = progress.map((p) => p.fraction);
    expect(fractions).toEqual([...fractions].sort((a, b) => a - b));
    expect(progress.length).toBeGreaterThan(20); // many pauses: a cancel is seen within milliseconds
    const last = answers.at(-1)!;
    if (last.kind !== 'replay_result') throw new Error(`expected replay_result, got ${last.kind}`);
    expect(last.result.events).toBe(events);
    expect(last.result.segment_event_mismatches).toBe(0);
    expect(last.result.real_peak_allocated_bytes).toBe(64 * 512);
    expect(new Uint8Array(last.bytes as ArrayBuffer)).toEqual(gz);
  });

  it('stops while the pickle is still being parsed when cancelled, and answers cancelled only', async () => {
    const { bytes } = syntheticSnapshot({ rounds: 6000 });
    const { host, answers, post } = setup();
    let parseSteps = 0;
    await host.handle({ kind: 'replay', id: 2, bytes: buffer(bytes) }, (a) => {
      post(a);
      if (a.kind === 'progress' && a.stage === 'parse' && ++parseSteps === 2) void host.handle({ kind: 'cancel', id: 2 }, post);
    });
    const kinds = answers.map((a) => a.kind);
    expect(kinds.at(-1)).toBe('cancelled');
    expect(kinds).not.toContain('replay_result');
    expect(answers.filter((a) => a.kind === 'progress').every((a) => a.stage === 'decompress' || a.stage === 'parse')).toBe(true);
  });

  it('reports a malformed pickle with the byte offset of the bad opcode', async () => {
    const { bytes } = syntheticSnapshot({ rounds: 10 });
    const bad = bytes.slice();
    const at = 5000;
    // find an opcode boundary near `at`: the start of an event's EMPTY_DICT MARK pair
    let offset = at;
    while (!(bad[offset] === 0x7d && bad[offset + 1] === 0x28)) offset++;
    bad[offset] = 0xff; // not an opcode of any protocol
    const { host, answers, post } = setup();
    await host.handle({ kind: 'replay', id: 3, bytes: buffer(bad) }, post);
    const a = answers.at(-1)!;
    if (a.kind !== 'error') throw new Error(`expected error, got ${a.kind}`);
    expect(a.internal).toBeUndefined();
    expect(a.message).toContain(`byte ${offset}`);
    expect(a.message).toContain('unknown pickle opcode byte 0xff');

    // cut short: the offset where the input ends
    const cut = bytes.slice(0, 4321);
    await host.handle({ kind: 'replay', id: 4, bytes: buffer(cut) }, post);
    const b = answers.at(-1)!;
    if (b.kind !== 'error') throw new Error(`expected error, got ${b.kind}`);
    expect(b.message).toMatch(/truncated pickle/);
    expect(b.message).toContain('4321');
  });

  it('refuses a gzip file whose uncompressed size is over the bound, before allocating it', () => {
    const gz = new Uint8Array(gzipSync(new Uint8Array(1 << 20)));
    const steps = maybeGunzipSteps(gz, 1000);
    expect(() => steps.next()).toThrow(/1048576 bytes uncompressed; memplan reads at most 1000/);
  });

  it('lists the segments at the peak: their allocated bytes are the replay’s real peak, their blocks tile them', () => {
    for (const name of ['cnn_amp_fp16.pickle.gz', 'transformer_ckpt.pickle.gz', 'expandable.pickle.gz', 'max_split.pickle.gz']) {
      const result = replay(readSnapshotBytes(fixture(name)), { whatIf: [] });
      const peak = result.peak_segments!;
      expect(peak.allocated_bytes, name).toBe(result.real_peak_allocated_bytes);
      expect(peak.reserved_bytes, name).toBeLessThanOrEqual(result.real_peak_reserved_bytes);
      expect(peak.segments.length, name).toBeGreaterThan(0);
      for (const s of peak.segments) {
        expect(s.blocks.reduce((n, b) => n + b.size, 0)).toBe(s.total_size);
        expect(s.blocks.filter((b) => b.state === 'active_allocated').reduce((n, b) => n + b.size, 0)).toBe(s.allocated_size);
        if (!s.is_expandable) for (let i = 1; i < s.blocks.length; i++) expect(s.blocks[i]!.address).toBe(s.blocks[i - 1]!.address + s.blocks[i - 1]!.size);
      }
    }
  });
});
