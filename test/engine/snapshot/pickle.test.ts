import { readFileSync, readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { gzipSync } from 'fflate';
import { InputError } from '../../../engine/errors.ts';
import { maybeGunzip } from '../../../engine/snapshot/gzip.ts';
import { PickleError, readPickle } from '../../../engine/snapshot/pickle.ts';
import type { PickleDict, PickleMap, PickleValue } from '../../../engine/snapshot/pickle.ts';

// Fixtures are written by test/fixtures/pickle/make_fixtures.py (CPython's own pickler); each NAME.json holds
// the value Python pickled, with markers for what JSON cannot express.
const FIXTURES = new URL('../../fixtures/pickle/', import.meta.url);

function fixture(name: string): Uint8Array {
  return new Uint8Array(readFileSync(new URL(name, FIXTURES)));
}

function fixtureJson(name: string): unknown {
  return JSON.parse(readFileSync(new URL(name, FIXTURES), 'utf8'));
}

/** Turns the JSON that make_fixtures.py wrote back into the value readPickle must return. */
function expected(j: unknown): PickleValue {
  if (j === null || typeof j !== 'object') return j as PickleValue;
  if (Array.isArray(j)) return j.map(expected);
  const o = j as Record<string, unknown>;
  const keys = Object.keys(o);
  if (keys.length === 1) {
    const k = keys[0]!;
    const v = o[k];
    if (k === '$bigint') return BigInt(v as string);
    if (k === '$float') return v === 'nan' ? NaN : v === 'inf' ? Infinity : -Infinity;
    if (k === '$bytes') {
      const hex = v as string;
      const out = new Uint8Array(hex.length / 2);
      for (let i = 0; i < out.length; i++) out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
      return out;
    }
    if (k === '$map') return new Map((v as [unknown, unknown][]).map(([a, b]) => [expected(a), expected(b)]));
  }
  const out: PickleDict = {};
  for (const k of keys) {
    const v = expected(o[k]);
    if (k === '__proto__') Object.defineProperty(out, k, { value: v, writable: true, enumerable: true, configurable: true });
    else out[k] = v;
  }
  return out;
}

function dict(v: PickleValue | undefined): PickleDict {
  expect(v).toBeTypeOf('object');
  expect(v).not.toBeInstanceOf(Map);
  expect(Array.isArray(v)).toBe(false);
  return v as PickleDict;
}

function list(v: PickleValue | undefined): PickleValue[] {
  expect(Array.isArray(v)).toBe(true);
  return v as PickleValue[];
}

function map(v: PickleValue | undefined): PickleMap {
  expect(v).toBeInstanceOf(Map);
  return v as PickleMap;
}

/** Runs fn, which must throw a PickleError; returns it. */
function pickleError(fn: () => unknown): PickleError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(PickleError);
    return e as PickleError;
  }
  throw new Error('expected a PickleError, but nothing was thrown');
}

// A small deterministic PRNG (mulberry32) for the random-input tests.
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const CASES = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.json') && !f.startsWith('err_') && !f.startsWith('big_'))
  .map((f) => f.slice(0, -'.json'.length))
  .sort();

describe('readPickle against CPython', () => {
  it('has the fixtures', () => {
    expect(CASES).toEqual(
      expect.arrayContaining(['small_snapshot', 'memo', 'ints', 'floats', 'strings', 'tuples', 'sets', 'nonstr_keys']),
    );
  });

  for (const name of CASES) {
    const spec = fixtureJson(`${name}.json`) as { protocols: number[]; value: unknown };
    for (const p of spec.protocols) {
      const file = name.includes('.p') ? `${name}.pkl` : `${name}.p${p}.pkl`;
      it(`${file} equals what Python pickled`, () => {
        expect(readPickle(fixture(file))).toStrictEqual(expected(spec.value));
      });
    }
  }
});

describe('readPickle values', () => {
  const protocols = [2, 3, 4, 5];

  it.each(protocols)('reads a PyTorch-like snapshot, protocol %i', (p) => {
    const snap = dict(readPickle(fixture(`small_snapshot.p${p}.pkl`)));
    expect(Object.keys(snap)).toEqual(['segments', 'device_traces', 'allocator_settings', 'external_annotations']);
    const trace = list(list(snap.device_traces)[0]);
    const ev = dict(trace[0]);
    // Key order is Python's insertion order.
    expect(Object.keys(ev)).toEqual([
      'action',
      'addr',
      'size',
      'stream',
      'time_us',
      'frames',
      'compile_context',
      'user_metadata',
    ]);
    expect(ev.addr).toBe(139872233390080);
    expect(ev.time_us).toBe(1732280000000000);
    expect(Object.getPrototypeOf(ev)).toBe(Object.prototype);
    // One traceback list object, shared by the segment, its block and two events.
    const seg = dict(list(snap.segments)[0]);
    expect(seg.frames).toBe(dict(list(seg.blocks)[0]).frames);
    expect(seg.frames).toBe(ev.frames);
    expect(dict(trace[1]).frames).toBe(ev.frames);
    expect(seg.segment_pool_id).toEqual([0, 0]);
  });

  it.each(protocols)('keeps memoized objects shared, protocol %i', (p) => {
    const v = dict(readPickle(fixture(`memo.p${p}.pkl`)));
    expect(v.a).toBe(v.b);
    const d = list(v.d);
    expect(d[0]).toBe(d[1]);
    expect(d[0]).toBe(v.c);
    expect(list(v.c)[0]).toBe(v.a);
    expect(v.s1).toBe('a string object used three times!');
    expect(v.s2).toBe(v.s1);
    expect(list(v.s3)[0]).toBe(v.s1);
  });

  it.each(protocols)('returns numbers for safe integers and bigints beyond, protocol %i', (p) => {
    const v = dict(readPickle(fixture(`ints.p${p}.pkl`)));
    const vals = list(v.values);
    for (const x of vals) {
      if (typeof x === 'bigint') {
        expect(x > BigInt(Number.MAX_SAFE_INTEGER) || x < BigInt(Number.MIN_SAFE_INTEGER)).toBe(true);
      } else {
        expect(Number.isSafeInteger(x)).toBe(true);
      }
    }
    expect(vals).toContain(2 ** 53 - 1);
    expect(vals).toContain(-(2 ** 53 - 1));
    expect(vals).toContain(2n ** 53n);
    expect(vals).toContain(-(2n ** 53n));
    expect(vals).toContain(2n ** 64n);
    expect(vals).toContain(-(2n ** 63n));
    expect(vals).toContain(2n ** 2100n + 12345n);
    expect(vals).toContain(-(2n ** 2100n));
  });

  it.each(protocols)('decodes UTF-8 as pickle wrote it, lone surrogates included, protocol %i', (p) => {
    const v = dict(readPickle(fixture(`strings.p${p}.pkl`)));
    expect(v.chinese).toBe('显存分配器的快照');
    expect(v.emoji).toBe('🚀 astral 𝔘𝔫𝔦𝔠𝔬𝔡𝔢');
    expect(v.lone_surrogate).toBe('a\ud800b');
    expect(v['中文键']).toBe('unicode key');
    expect((v.very_long_unicode as string).endsWith('分配\ud83d')).toBe(true);
  });

  it.each([3, 4, 5])('reads bytes as Uint8Array, protocol %i', (p) => {
    const v = dict(readPickle(fixture(`bytes.p${p}.pkl`)));
    expect(v.small).toBeInstanceOf(Uint8Array);
    expect(Array.from(v.small as Uint8Array)).toEqual([0, 1, 0xfe, 0xff]);
    expect((v.long as Uint8Array).length).toBe(768);
    if (p === 5) expect(Array.from(v.bytearray as Uint8Array)).toEqual([0x10, 0x20, 0x30]);
  });

  it.each(protocols)('reads dicts with non-string keys as Maps, keeping identity, protocol %i', (p) => {
    const v = dict(readPickle(fixture(`nonstr_keys.p${p}.pkl`)));
    const m = map(v.int_keyed);
    expect(m.get(1)).toBe('one');
    expect(m.get(-5)).toBe('minus five');
    expect(m.get(2n ** 60n)).toBe('big');
    expect(v.again).toBe(m);
    const mixed = map(v.mixed);
    expect(mixed.get('a')).toBe(1);
    expect(mixed.get(null)).toBe('none');
    expect(mixed.get(true)).toBe('true');
    expect(mixed.get(1.5)).toBe('float');
    // A dict that turned into a Map after 1500 string keys (over one SETITEMS batch).
    const late = map(v.late_int_key);
    expect(late.size).toBe(1501);
    expect([...late.keys()].slice(0, 2)).toEqual(['k0', 'k1']);
    expect(late.get(99)).toBe('int after 1500 string keys');
    // Nested Maps, and a reference to the first Map from inside them.
    const nested = map(list(v.nested)[0]);
    const inner = map(dict(nested.get(0)).inner);
    expect(list(inner.get(7))[0]).toBe(m);
  });

  it.each(protocols)('reads recursive structures, protocol %i', (p) => {
    const v = dict(readPickle(fixture(`recursive.p${p}.pkl`)));
    const l = list(v.list);
    expect(l[0]).toBe(l);
    const d = dict(v.dict);
    expect(d.me).toBe(d);
    expect(d.name).toBe('self');
    const t = list(v.tuple);
    expect(t[1]).toBe('t');
    expect(list(t[0])[0]).toBe(t);
    const m = map(v.map);
    expect(m.get(1)).toBe(m);
  });

  it('does not let a "__proto__" key change the prototype', () => {
    // {"__proto__": {"polluted": True}, "constructor": "x"}, protocol 4, written by hand.
    const bytes = new Uint8Array([
      0x80, 4, 0x7d, 0x28, 0x8c, 9, ...new TextEncoder().encode('__proto__'), 0x7d, 0x28, 0x8c, 8,
      ...new TextEncoder().encode('polluted'), 0x88, 0x75, 0x8c, 11, ...new TextEncoder().encode('constructor'), 0x8c,
      1, 0x78, 0x75, 0x2e,
    ]);
    const v = dict(readPickle(bytes));
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.keys(v)).toEqual(['__proto__', 'constructor']);
    expect(Object.getOwnPropertyDescriptor(v, '__proto__')?.value).toEqual({ polluted: true });
    expect(v.constructor).toBe('x');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('reads the opcodes of protocol 1 that plain values use (DICT, LIST, TUPLE, POP_MARK, DUP)', () => {
    // Built by hand, without PROTO, as protocol 1 would: ({1: 2}, ([3], (5, 6), (5, 6))) with the two (5, 6) one object.
    const bytes = new Uint8Array([
      0x28, 0x4b, 1, 0x4b, 2, 0x64, // MARK 1 2 DICT -> {1: 2}
      0x28, 0x4b, 3, 0x6c, // MARK 3 LIST -> [3]
      0x28, 0x4b, 4, 0x31, // MARK 4 POP_MARK -> (nothing)
      0x28, 0x4b, 5, 0x4b, 6, 0x74, 0x32, // MARK 5 6 TUPLE DUP -> (5, 6) (5, 6)
      0x87, // TUPLE3 of the last three -> ([3], (5,6), (5,6))
      0x86, // TUPLE2 -> ({1: 2}, ([3], (5,6), (5,6)))
      0x2e,
    ]);
    const v = list(readPickle(bytes));
    expect(v[0]).toEqual(new Map([[1, 2]]));
    const t = list(v[1]);
    expect(t[0]).toEqual([3]);
    expect(t[1]).toEqual([5, 6]);
    expect(t[1]).toBe(t[2]);
  });

  it('accepts subarrays of a larger buffer', () => {
    const inner = fixture('small_snapshot.p4.pkl');
    const big = new Uint8Array(inner.length + 17);
    big.set(inner, 9);
    expect(readPickle(big.subarray(9, 9 + inner.length))).toStrictEqual(readPickle(inner));
  });
});

describe('readPickle errors', () => {
  const errCases = fixtureJson('err_cases.json') as { file: string; opcode: string; offset: number; mentions: string }[];

  it.each(errCases)('refuses $file: $opcode', ({ file, opcode, offset, mentions }) => {
    const e = pickleError(() => readPickle(fixture(file)));
    expect(e).toBeInstanceOf(InputError);
    expect(e.offset).toBe(offset);
    expect(e.message).toContain(`byte ${offset}`);
    expect(e.message).toMatch(new RegExp(`\\b${opcode} \\(0x[0-9a-f]{2}\\)`));
    expect(e.message).toContain(mentions);
    expect(e.message).toContain('torch.cuda.memory._dump_snapshot()');
  });

  it('refuses an empty input', () => {
    const e = pickleError(() => readPickle(new Uint8Array(0)));
    expect(e.offset).toBe(0);
    expect(e.message).toMatch(/empty input/);
  });

  it('refuses bytes that are not a pickle', () => {
    const e = pickleError(() => readPickle(new TextEncoder().encode('{"segments": []}')));
    expect(e.offset).toBe(0);
    expect(e.message).toMatch(/^byte 0: unknown pickle opcode byte 0x7b: the input is not a pickle/);
    expect(e.message).toMatch(/does not start with the PROTO opcode 0x80/);
  });

  it('refuses a protocol newer than 5', () => {
    const e = pickleError(() => readPickle(new Uint8Array([0x80, 6, 0x4e, 0x2e])));
    expect(e.message).toBe('byte 0: unsupported pickle protocol 6 (memplan reads protocols 2 to 5)');
  });

  it('refuses a missing STOP', () => {
    const e = pickleError(() => readPickle(new Uint8Array([0x80, 2, 0x4e])));
    expect(e.offset).toBe(3);
    expect(e.message).toMatch(/without a STOP opcode/);
  });

  it('refuses a bad memo index', () => {
    const e = pickleError(() => readPickle(new Uint8Array([0x80, 4, 0x4e, 0x94, 0x68, 5, 0x2e])));
    expect(e.offset).toBe(4);
    expect(e.message).toBe('byte 4: malformed pickle: BINGET (0x68) reads memo index 5, which was never stored');
    const e2 = pickleError(() => readPickle(new Uint8Array([0x80, 4, 0x6a, 0xff, 0xff, 0xff, 0xff, 0x2e])));
    expect(e2.message).toMatch(/LONG_BINGET \(0x6a\) reads memo index 4294967295/);
  });

  it('refuses stack underflow and a missing MARK', () => {
    expect(pickleError(() => readPickle(new Uint8Array([0x80, 2, 0x73, 0x2e]))).message).toMatch(
      /SETITEM \(0x73\) needs 3 value\(s\) on the stack but 0 are there/,
    );
    expect(pickleError(() => readPickle(new Uint8Array([0x80, 2, 0x5d, 0x4e, 0x65, 0x2e]))).message).toMatch(
      /APPENDS \(0x65\) has no MARK before it/,
    );
    expect(pickleError(() => readPickle(new Uint8Array([0x80, 2, 0x2e]))).message).toMatch(/STOP with nothing/);
    // Items below a MARK are not reachable until the MARK is closed.
    expect(pickleError(() => readPickle(new Uint8Array([0x80, 2, 0x5d, 0x28, 0x4e, 0x61, 0x2e]))).message).toMatch(
      /APPEND \(0x61\) needs 2 value\(s\) on the stack but 1 are there/,
    );
  });

  it('refuses containers of the wrong kind', () => {
    expect(pickleError(() => readPickle(new Uint8Array([0x80, 2, 0x5d, 0x4e, 0x4e, 0x73, 0x2e]))).message).toMatch(
      /SETITEM \(0x73\) applied to something that is not a dict/,
    );
    expect(pickleError(() => readPickle(new Uint8Array([0x80, 2, 0x7d, 0x4e, 0x61, 0x2e]))).message).toMatch(
      /APPEND \(0x61\) applied to something that is not a list/,
    );
    expect(pickleError(() => readPickle(new Uint8Array([0x80, 2, 0x7d, 0x28, 0x4e, 0x75, 0x2e]))).message).toMatch(
      /odd number of keys and values/,
    );
  });

  it('refuses lengths running past the end', () => {
    // BINUNICODE claiming 4 GiB - 1, BINBYTES8 claiming 2^40, SHORT_BINUNICODE claiming 10 of 2 bytes.
    const cases: [number[], RegExp][] = [
      [[0x80, 2, 0x58, 0xff, 0xff, 0xff, 0xff, 0x61], /BINUNICODE \(0x58\) needs 4294967295 more byte/],
      [[0x80, 4, 0x8e, 0, 0, 0, 0, 0, 1, 0, 0, 0x2e], /BINBYTES8 \(0x8e\) needs 1099511627776 more byte/],
      [[0x80, 4, 0x8c, 10, 0x61, 0x62], /SHORT_BINUNICODE \(0x8c\) needs 10 more byte/],
      [[0x80, 4, 0x95, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x4e, 0x2e], /FRAME announces 255 bytes but only 2 remain/],
      [[0x80, 4, 0x8b, 0xff, 0xff, 0xff, 0xff, 0x2e], /LONG4 with negative length -1/],
      [[0x80, 4, 0x4a, 1, 2], /BININT \(0x4a\) needs 4 more byte/],
    ];
    for (const [bytes, re] of cases) {
      const e = pickleError(() => readPickle(new Uint8Array(bytes)));
      expect(e.offset).toBe(2);
      expect(e.message).toMatch(re);
    }
  });

  it('refuses invalid UTF-8', () => {
    const e = pickleError(() => readPickle(new Uint8Array([0x80, 4, 0x8c, 2, 0xc3, 0x28, 0x2e])));
    expect(e.message).toMatch(/invalid UTF-8 in the string of the opcode at byte 2/);
    expect(e.offset).toBe(4);
  });

  it.each(['small_snapshot.p2.pkl', 'small_snapshot.p4.pkl', 'strings.p3.pkl', 'nonstr_keys.p5.pkl'])(
    'refuses %s truncated at any offset',
    (file) => {
      const full = fixture(file);
      const step = full.length > 3000 ? 7 : 1;
      for (let cut = 0; cut < full.length; cut += step) {
        const e = pickleError(() => readPickle(full.subarray(0, cut)));
        expect(e.offset).toBeLessThanOrEqual(cut);
        expect(e.message).toMatch(cut === 0 ? /empty input/ : /truncated pickle/);
        expect(e.message).toMatch(/^byte \d+: /);
      }
    },
  );

  it('truncation of an unframed pickle names the opcode that was cut', () => {
    const full = fixture('small_snapshot.p2.pkl');
    const e = pickleError(() => readPickle(full.subarray(0, 10)));
    expect(e.message).toMatch(/^byte \d+: truncated pickle: (BINUNICODE|BINPUT) \(0x[0-9a-f]{2}\) needs \d+ more byte/);
  });

  it('never throws anything but PickleError on random or corrupted input, and never hangs', () => {
    const next = rng(20241122);
    const base = fixture('small_snapshot.p4.pkl');
    const base2 = fixture('ints.p2.pkl');
    let errors = 0;
    for (let n = 0; n < 3000; n++) {
      let bytes: Uint8Array;
      if (n % 3 === 0) {
        bytes = new Uint8Array(1 + Math.floor(next() * 300));
        for (let i = 0; i < bytes.length; i++) bytes[i] = Math.floor(next() * 256);
        if (n % 2 === 0) bytes[0] = 0x80; // get past the first byte now and then
      } else {
        bytes = (n % 3 === 1 ? base : base2).slice();
        const flips = 1 + Math.floor(next() * 4);
        for (let f = 0; f < flips; f++) bytes[Math.floor(next() * bytes.length)] = Math.floor(next() * 256);
      }
      try {
        readPickle(bytes);
      } catch (e) {
        expect(e).toBeInstanceOf(PickleError);
        expect((e as PickleError).message).toMatch(/^byte \d+: /);
        errors++;
      }
    }
    expect(errors).toBeGreaterThan(1000);
  });
});

describe('maybeGunzip', () => {
  it('returns other input unchanged', () => {
    const raw = fixture('small_snapshot.p4.pkl');
    expect(maybeGunzip(raw)).toBe(raw);
    const empty = new Uint8Array(0);
    expect(maybeGunzip(empty)).toBe(empty);
  });

  it('decompresses gzip', () => {
    const raw = fixture('small_snapshot.p4.pkl');
    const gz = gzipSync(raw);
    expect(gz[0]).toBe(0x1f);
    expect(maybeGunzip(gz)).toEqual(raw);
  });

  it('refuses truncated or corrupt gzip with a clear message', () => {
    const raw = fixture('strings.p4.pkl');
    const gz = gzipSync(raw);
    for (const cut of [2, 10, 30, gz.length >> 1, gz.length - 9, gz.length - 4, gz.length - 1]) {
      expect(() => maybeGunzip(gz.subarray(0, cut))).toThrow(/^not a valid gzip file: /);
    }
    const flipped = gz.slice();
    flipped[gz.length >> 1]! ^= 0x40;
    expect(() => maybeGunzip(flipped)).toThrow(/^not a valid gzip file: /);
    const badCrc = gz.slice();
    badCrc[gz.length - 6]! ^= 0x01;
    expect(() => maybeGunzip(badCrc)).toThrow(/does not match the size and CRC-32/);
  });
});

describe('a big synthetic snapshot (70,000 trace events)', () => {
  const summary = fixtureJson('big_snapshot.summary.json') as {
    pickle_bytes: number;
    n_events: number;
    n_segments: number;
    n_blocks: number;
    action_counts: Record<string, number>;
    size_sum: number;
    addr_sum: string;
    time_us_last: number;
    frames_total: number;
    line_sum: number;
    sample: { index: number; event: unknown }[];
    first: unknown;
    last: unknown;
    segment0: unknown;
    allocator_settings: unknown;
  };

  it('reads exactly what Python wrote', () => {
    const raw = maybeGunzip(fixture('big_snapshot.p4.pkl.gz'));
    expect(raw.length).toBe(summary.pickle_bytes);
    const snap = dict(readPickle(raw));
    // Plain casts in the loops below: 700,000 expect() calls would take seconds.
    const events = list(list(snap.device_traces)[0]) as PickleDict[];
    const segments = list(snap.segments) as PickleDict[];
    expect(events.length).toBe(summary.n_events);
    expect(segments.length).toBe(summary.n_segments);
    expect(segments.reduce((n, s) => n + (s.blocks as PickleValue[]).length, 0)).toBe(summary.n_blocks);

    const counts: Record<string, number> = {};
    let sizeSum = 0;
    let addrSum = 0n;
    let framesTotal = 0;
    let lineSum = 0;
    const traceLists = new Set<PickleValue>();
    for (const e of events) {
      const a = e.action as string;
      counts[a] = (counts[a] ?? 0) + 1;
      sizeSum += e.size as number;
      addrSum += BigInt(e.addr as number);
      const frames = e.frames as PickleDict[];
      framesTotal += frames.length;
      for (const f of frames) lineSum += f.line as number;
      if (frames.length > 0) traceLists.add(frames);
    }
    expect(counts).toEqual(summary.action_counts);
    expect(sizeSum).toBe(summary.size_sum);
    expect(addrSum).toBe(BigInt(summary.addr_sum));
    expect(framesTotal).toBe(summary.frames_total);
    expect(lineSum).toBe(summary.line_sum);
    // Tracebacks are shared objects in Python (2,500 of them) and stay shared.
    expect(traceLists.size).toBeLessThanOrEqual(2500);
    expect(events.at(-1)!.time_us).toBe(summary.time_us_last);

    expect(events[0]).toStrictEqual(expected(summary.first));
    expect(events.at(-1)).toStrictEqual(expected(summary.last));
    for (const { index, event } of summary.sample) expect(events[index]).toStrictEqual(expected(event));
    expect(segments[0]).toStrictEqual(expected(summary.segment0));
    expect(snap.allocator_settings).toStrictEqual(expected(summary.allocator_settings));
    expect(snap.external_annotations).toEqual([]);
  });
});
