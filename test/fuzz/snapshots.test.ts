/**
 * Snapshot files, malformed, truncated and hostile, through the snapshot reader and the worker host's replay:
 * each ends in a replay result with finite numbers or a clear error (a pickle's names the byte offset), in bounded
 * time and memory; a snapshot of 2 million events still replays. Each test prints how many inputs it tried.
 */
import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import catalog from '../../resources/gpus.json' with { type: 'json' };
import { InputError, createEngineHost, engineAnswerSchema, maybeGunzip, readSnapshotBytes, replay, type EngineAnswer } from '../../engine/index.ts';
import { syntheticSnapshot } from '../engine/snapshot/synthetic-snapshot.ts';
import { Outcomes, expectClearEnding, expectFinite } from './inputs.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 12);
const recorded = maybeGunzip(readFileSync(new URL('../fixtures/traces/max_split.pickle.gz', import.meta.url)));
/** The inputs mutated, by name (a counterexample then reads as a name and the edits, not as the file's bytes). */
const BASES: Record<string, Uint8Array> = { recorded, synthetic: syntheticSnapshot({ rounds: 4 }).bytes };

/** A byte-level change: flip, overwrite with an opcode or a huge length, cut, insert. */
const byteEdit = fc.record({
  kind: fc.constantFrom('flip', 'opcode', 'length', 'cut', 'insert'),
  at: fc.nat(),
  byte: fc.integer({ min: 0, max: 255 }),
  opcode: fc.constantFrom(0x63, 0x52, 0x62, 0x81, 0x93, 0x69, 0x00, 0xff, 0x28, 0x30, 0x31, 0x2e, 0x58, 0x8d, 0x8e, 0x96, 0x8b, 0x95, 0x6a, 0x72, 0x32),
});

function edit(bytes: Uint8Array, edits: readonly { kind: string; at: number; byte: number; opcode: number }[]): Uint8Array {
  let b: Uint8Array = bytes.slice();
  for (const e of edits) {
    const at = e.at % Math.max(1, b.length);
    if (e.kind === 'flip') b[at] = b[at]! ^ (1 << (e.byte % 8));
    else if (e.kind === 'opcode') b[at] = e.opcode;
    else if (e.kind === 'length') b.set([e.opcode, 0xff, 0xff, 0xff, 0x7f, 0xff, 0xff, 0xff, 0x7f].slice(0, Math.max(0, b.length - at)), at); // an opcode with a length near 2^63
    else if (e.kind === 'cut') b = b.slice(0, at);
    else {
      const inserted = new Uint8Array(b.length + 1);
      inserted.set(b.subarray(0, at));
      inserted[at] = e.opcode;
      inserted.set(b.subarray(at), at + 1);
      b = inserted;
    }
  }
  return b;
}

/** Reads a snapshot and replays it; the outcome's kind, or a failure if it threw anything but a clear InputError. */
function readAndReplay(bytes: Uint8Array): string {
  let snapshot;
  try {
    snapshot = readSnapshotBytes(bytes);
  } catch (error) {
    if (!(error instanceof InputError)) throw new Error(`not an input error: ${String(error)} (${bytes.length} bytes)`);
    // a pickle's problem names its byte offset; gzip's and the snapshot dict's name what is wrong
    if (error.where === 'snapshot' && !/gzip|JSON|snapshot|dictionary/i.test(error.problem)) expect(error.problem).toMatch(/^byte \d+: /);
    return 'error';
  }
  try {
    const result = replay(snapshot, { whatIf: [] });
    expectFinite(result);
    return 'replay_result';
  } catch (error) {
    if (!(error instanceof InputError)) throw new Error(`not an input error in replay: ${String(error)}`);
    return 'error';
  }
}

/** A pickle of n nested lists: `[[[...]]]` by EMPTY_LIST then APPEND, or by MARK ... LIST. */
function nested(depth: number, withMarks: boolean): Uint8Array {
  const ops: number[] = [0x80, 0x04];
  if (withMarks) {
    for (let i = 0; i < depth; i++) ops.push(0x28);
    for (let i = 0; i < depth; i++) ops.push(0x6c);
  } else {
    for (let i = 0; i < depth; i++) ops.push(0x5d);
    for (let i = 0; i < depth - 1; i++) ops.push(0x61);
  }
  ops.push(0x2e);
  return Uint8Array.from(ops);
}

describe('fuzz: snapshot files', () => {
  it('mutated pickles (recorded and synthetic) replay or fail with a clear error', () => {
    const outcomes = new Outcomes();
    const t0 = performance.now();
    fc.assert(
      fc.property(fc.constantFrom('recorded', 'synthetic'), fc.array(byteEdit, { minLength: 1, maxLength: 4 }), (base, edits) => {
        const bytes = edit(BASES[base]!, edits);
        const s = performance.now();
        const kind = readAndReplay(bytes);
        const ms = performance.now() - s;
        expect(ms).toBeLessThan(5000);
        outcomes.add(kind, ms);
      }),
      { numRuns: 1500, seed: SEED },
    );
    console.log(`snapshot reader and replay, mutated pickles: ${outcomes} in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    expect(outcomes.counts.get('error') ?? 0).toBeGreaterThan(100);
  });

  it('random bytes, and hostile pickles: huge lengths, deep nesting, unknown and object-building opcodes', () => {
    const outcomes = new Outcomes();
    const hostile: Uint8Array[] = [
      nested(1_000_000, false), // a million lists deep, built without recursion
      nested(200_000, true),
      Uint8Array.from([0x80, 0x04, 0x8d, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]), // BINUNICODE8 of 2^63 bytes
      Uint8Array.from([0x80, 0x04, 0x95, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0x4e, 0x2e]), // FRAME longer than the file
      Uint8Array.from([0x80, 0x04, 0x8b, 0xff, 0xff, 0xff, 0x7f]), // LONG4 of 2 GiB
      Uint8Array.from([0x80, 0x04, 0x6a, 0xff, 0xff, 0xff, 0xff, 0x2e]), // LONG_BINGET of a memo never stored
      Uint8Array.from([0x80, 0x04, 0x4e, 0x72, 0xff, 0xff, 0xff, 0x7f, 0x2e]), // LONG_BINPUT at index 2^31 - 1
      Uint8Array.from([0x80, 0x02, 0x63, ...new TextEncoder().encode('os\nsystem\n'), 0x2e]), // GLOBAL os.system
      Uint8Array.from([0x80, 0x04, 0x4e, 0x29, 0x52, 0x2e]), // REDUCE
      Uint8Array.from([0x80, 0x04, 0xfe, 0x2e]), // an unknown opcode
      Uint8Array.from([0x80, 0x09]), // protocol 9
      Uint8Array.from([0x1f, 0x8b, 0x08, 0x00, 1, 2, 3]), // a gzip header and nothing after it
    ];
    for (const bytes of hostile) {
      const s = performance.now();
      outcomes.add(readAndReplay(bytes), performance.now() - s);
    }
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 256 }), fc.boolean(), (tail, asPickle) => {
        const bytes = asPickle ? Uint8Array.from([0x80, 0x04, ...tail]) : tail;
        const s = performance.now();
        outcomes.add(readAndReplay(bytes), performance.now() - s);
      }),
      { numRuns: 1500, seed: SEED },
    );
    console.log(`snapshot reader, hostile and random bytes: ${outcomes}`);
    expect(outcomes.slowestMs).toBeLessThan(5000);
  });

  it('mutated snapshots through the worker host answer a result or a non-internal error', async () => {
    const host = createEngineHost({ catalog, convTable: async () => null });
    const outcomes = new Outcomes();
    let id = 1;
    await fc.assert(
      fc.asyncProperty(fc.array(byteEdit, { maxLength: 3 }), async (edits) => {
        const bytes = edit(recorded, edits);
        const answers: EngineAnswer[] = [];
        const s = performance.now();
        await host.handle({ kind: 'replay', id: id++, bytes, what_if: [] }, (a) => {
          expect(engineAnswerSchema.safeParse(structuredClone(a)).success).toBe(true);
          answers.push(a);
        });
        outcomes.add(expectClearEnding(answers, `${bytes.length} bytes`), performance.now() - s);
      }),
      { numRuns: 200, seed: SEED },
    );
    console.log(`worker replay, mutated snapshots: ${outcomes}`);
  });

  it('a snapshot of 2 million events replays', () => {
    const { bytes, events } = syntheticSnapshot({ rounds: 10_420 });
    expect(events).toBeGreaterThanOrEqual(2_000_000);
    const t0 = performance.now();
    const result = replay(readSnapshotBytes(bytes), { whatIf: [] });
    expectFinite(result);
    console.log(`a snapshot of ${events.toLocaleString('en-US')} events (${(bytes.length / 1e6).toFixed(0)} MB) read and replayed in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  });
});
