// A reader of Python pickles (protocols 2 to 5) that hold only plain values: dicts, lists, tuples, sets,
// ints, floats, strings, bytes, booleans and None. This is what `torch.cuda.memory._dump_snapshot()` writes.
// Anything that would import or construct a Python object (GLOBAL, REDUCE, BUILD, ...) is refused with a
// PickleError: memplan never runs code from a pickle.
//
// Value mapping:
//   dict        -> plain object `{}` when every key is a string, else `Map` (keys as read; tuples are arrays,
//                  compared by identity)
//   list, tuple, set, frozenset -> array
//   int         -> number when it is a safe integer, else bigint
//   float       -> number
//   str         -> string (lone surrogates, which pickle writes with 'surrogatepass', are kept)
//   bytes, bytearray -> Uint8Array (a copy)
//   True/False  -> boolean, None -> null
// Objects that the pickle memoizes and references more than once come back as the same JavaScript object.
//
// Pure: no Node or DOM APIs. `TextDecoder` is used, when present, for long non-ASCII strings only.

import { InputError } from '../errors.ts';

export type PickleValue =
  | null
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | PickleValue[]
  | PickleDict
  | PickleMap;

export interface PickleDict {
  [key: string]: PickleValue;
}

export type PickleMap = Map<PickleValue, PickleValue>;

/**
 * A pickle that memplan cannot read. `message` reads "byte N: what is wrong"; `offset` is N, the byte offset in
 * the (decompressed) input, usually the start of the offending opcode.
 */
export class PickleError extends InputError {
  readonly offset: number;

  constructor(problem: string, offset: number) {
    super(`byte ${offset}`, problem);
    this.name = 'PickleError';
    this.offset = offset; // `problem` (InputError's) is the message without its "byte N: " prefix
  }
}

const PLAIN_ONLY =
  'memplan reads only plain-value pickles (dicts, lists, tuples, strings, numbers, bytes), ' +
  'such as the one torch.cuda.memory._dump_snapshot() writes';

// Every opcode of protocols 0 to 5, for error messages.
const OPCODE_NAMES: { [code: number]: string } = {
  0x28: 'MARK',
  0x2e: 'STOP',
  0x30: 'POP',
  0x31: 'POP_MARK',
  0x32: 'DUP',
  0x46: 'FLOAT',
  0x49: 'INT',
  0x4a: 'BININT',
  0x4b: 'BININT1',
  0x4c: 'LONG',
  0x4d: 'BININT2',
  0x4e: 'NONE',
  0x50: 'PERSID',
  0x51: 'BINPERSID',
  0x52: 'REDUCE',
  0x53: 'STRING',
  0x54: 'BINSTRING',
  0x55: 'SHORT_BINSTRING',
  0x56: 'UNICODE',
  0x58: 'BINUNICODE',
  0x61: 'APPEND',
  0x62: 'BUILD',
  0x63: 'GLOBAL',
  0x64: 'DICT',
  0x7d: 'EMPTY_DICT',
  0x65: 'APPENDS',
  0x67: 'GET',
  0x68: 'BINGET',
  0x69: 'INST',
  0x6a: 'LONG_BINGET',
  0x6c: 'LIST',
  0x5d: 'EMPTY_LIST',
  0x6f: 'OBJ',
  0x70: 'PUT',
  0x71: 'BINPUT',
  0x72: 'LONG_BINPUT',
  0x73: 'SETITEM',
  0x74: 'TUPLE',
  0x29: 'EMPTY_TUPLE',
  0x75: 'SETITEMS',
  0x47: 'BINFLOAT',
  0x80: 'PROTO',
  0x81: 'NEWOBJ',
  0x82: 'EXT1',
  0x83: 'EXT2',
  0x84: 'EXT4',
  0x85: 'TUPLE1',
  0x86: 'TUPLE2',
  0x87: 'TUPLE3',
  0x88: 'NEWTRUE',
  0x89: 'NEWFALSE',
  0x8a: 'LONG1',
  0x8b: 'LONG4',
  0x42: 'BINBYTES',
  0x43: 'SHORT_BINBYTES',
  0x8c: 'SHORT_BINUNICODE',
  0x8d: 'BINUNICODE8',
  0x8e: 'BINBYTES8',
  0x8f: 'EMPTY_SET',
  0x90: 'ADDITEMS',
  0x91: 'FROZENSET',
  0x92: 'NEWOBJ_EX',
  0x93: 'STACK_GLOBAL',
  0x94: 'MEMOIZE',
  0x95: 'FRAME',
  0x96: 'BYTEARRAY8',
  0x97: 'NEXT_BUFFER',
  0x98: 'READONLY_BUFFER',
};

// Opcodes that only the text protocols (0 and 1, or Python 2) write.
const TEXT_OPCODES = new Set([0x46, 0x49, 0x4c, 0x53, 0x54, 0x55, 0x56, 0x67, 0x70]);

function hex2(b: number): string {
  return '0x' + (b < 16 ? '0' : '') + b.toString(16);
}

function opLabel(op: number): string {
  const name = OPCODE_NAMES[op];
  return name === undefined ? `unknown opcode ${hex2(op)}` : `${name} (${hex2(op)})`;
}

/** Parses a pickle and returns its top-level value. Throws PickleError on anything it cannot read. */
export function readPickle(bytes: Uint8Array): PickleValue {
  const steps = readPickleSteps(bytes);
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
  }
}

/** Opcodes read between two yields of `readPickleSteps` (a few milliseconds of work). */
export const PICKLE_OPS_PER_STEP = 1 << 18;

/**
 * `readPickle` in steps, for a caller that must stay responsive (the app's worker: progress bar, cancel): yields
 * the byte offset reached every PICKLE_OPS_PER_STEP opcodes, returns the value. The same errors as readPickle.
 */
export function* readPickleSteps(bytes: Uint8Array): Generator<number, PickleValue, void> {
  try {
    return yield* parse(bytes);
  } catch (e) {
    const notPickle =
      bytes.length > 0 && bytes[0]! !== 0x80
        ? ' (the input does not start with the PROTO opcode 0x80 that pickles of protocol 2 and later begin with: it is probably not a pickle)'
        : '';
    if (e instanceof PickleError) {
      if (notPickle === '') throw e;
      throw new PickleError(e.problem + notPickle, e.offset);
    }
    // Should not happen: every read is bounds-checked. Still, never leak a raw TypeError/RangeError.
    const msg = e instanceof Error ? e.message : String(e);
    throw new PickleError(`could not read the pickle: ${msg}${notPickle}`, 0);
  }
}

function isDictLike(x: unknown): boolean {
  return x !== null && typeof x === 'object' && !Array.isArray(x) && !(x instanceof Uint8Array);
}

function* parse(bytes: Uint8Array): Generator<number, PickleValue, void> {
  const len = bytes.length;
  if (len === 0) throw new PickleError('empty input: a pickle has at least a STOP opcode', 0);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);

  // The stack is stack[0, sp). It never shrinks (shrinking and regrowing a JS array reallocates it).
  const stack: unknown[] = [];
  let sp = 0;
  const marks: number[] = []; // saved `base` values, one per open MARK
  let base = 0; // stack index where the innermost open MARK was set (0 when none)
  const memo: unknown[] = [];
  let memoSize = 0; // number of memo slots in use (Python's len(memo)), used by MEMOIZE
  // Dicts first read as plain objects and then given a non-string key become Maps; old -> new.
  let replaced: Map<object, PickleMap> | null = null;
  let pos = 0;
  let start = 0; // offset of the current opcode
  let opsLeft = PICKLE_OPS_PER_STEP; // opcodes until the next yield

  const fail = (msg: string, at: number = start): never => {
    throw new PickleError(msg, at);
  };
  const truncated = (need: number): never =>
    fail(`truncated pickle: ${opLabel(bytes[start]!)} needs ${need} more byte(s) but the input ends at byte ${len}`);
  const underflow = (need: number): never =>
    fail(`malformed pickle: ${opLabel(bytes[start]!)} needs ${need} value(s) on the stack but ${sp - base} are there`);
  const push = (v: unknown): void => {
    if (sp === stack.length) stack.push(v);
    else stack[sp] = v;
    sp++;
  };
  const popMark = (): number => {
    if (marks.length === 0) fail(`malformed pickle: ${opLabel(bytes[start]!)} has no MARK before it`);
    const m = base;
    base = marks.pop()!;
    return m;
  };
  const readU64 = (p: number): number => {
    const lo = dv.getUint32(p, true);
    const hi = dv.getUint32(p + 4, true);
    // Beyond 2^53 the value is not exact, but it is then far larger than any input anyway.
    return hi * 4294967296 + lo;
  };
  const memoGet = (i: number): unknown => {
    let v = memo[i];
    if (v === undefined) fail(`malformed pickle: ${opLabel(bytes[start]!)} reads memo index ${i}, which was never stored`);
    if (replaced !== null && typeof v === 'object' && v !== null) {
      const r = replaced.get(v);
      if (r !== undefined) v = r;
    }
    return v;
  };
  const memoPut = (i: number): void => {
    if (sp <= base) underflow(1);
    if (i === memo.length) {
      memo.push(stack[sp - 1]);
      memoSize++;
    } else {
      if (memo[i] === undefined) memoSize++;
      memo[i] = stack[sp - 1];
    }
  };
  // Sets d[k] = v for the cases the fast path does not handle; returns the dict (a new Map if d was converted).
  const setItemSlow = (d: object, k: unknown, v: unknown): object => {
    if (d instanceof Map) {
      d.set(k, v);
      return d;
    }
    if (typeof k === 'string') {
      // Only '__proto__' gets here: define it as an own property rather than setting the prototype.
      Object.defineProperty(d, k, { value: v, writable: true, enumerable: true, configurable: true });
      return d;
    }
    // A non-string key: this dict becomes a Map, with its items so far in the same order.
    const m: PickleMap = new Map();
    const old = d as PickleDict;
    for (const key of Object.keys(old)) m.set(key, old[key] as PickleValue);
    m.set(k as PickleValue, v as PickleValue);
    if (replaced === null) replaced = new Map();
    replaced.set(d, m);
    for (let i = 0; i < sp; i++) if (stack[i] === d) stack[i] = m;
    return m;
  };
  // Sets the items stack[from, sp) on the dict at stack[dictIndex] and pops them.
  const setItems = (dictIndex: number, from: number): void => {
    let d = stack[dictIndex];
    if (!isDictLike(d)) fail(`malformed pickle: ${opLabel(bytes[start]!)} applied to something that is not a dict`);
    const end = sp;
    if ((end - from) & 1) fail(`malformed pickle: ${opLabel(bytes[start]!)} with an odd number of keys and values`);
    let plain = !(d instanceof Map);
    for (let i = from; i < end; i += 2) {
      const k = stack[i];
      if (plain && typeof k === 'string' && k !== '__proto__') {
        (d as { [key: string]: unknown })[k] = stack[i + 1];
      } else {
        d = setItemSlow(d as object, k, stack[i + 1]);
        plain = !(d instanceof Map);
      }
    }
    sp = from;
  };
  // Appends stack[from, sp) to the list (or set) at stack[listIndex] and pops them.
  const appendItems = (listIndex: number, from: number): void => {
    const list = stack[listIndex];
    if (!Array.isArray(list)) fail(`malformed pickle: ${opLabel(bytes[start]!)} applied to something that is not a list or set`);
    const l = list as unknown[];
    for (let i = from; i < sp; i++) l.push(stack[i]);
    sp = from;
  };
  const pops = (from: number): unknown[] => {
    const t = stack.slice(from, sp);
    sp = from;
    return t;
  };

  for (;;) {
    if (pos >= len) {
      fail(`truncated pickle: the input ends at byte ${len} without a STOP opcode`, len);
    }
    if (--opsLeft === 0) {
      opsLeft = PICKLE_OPS_PER_STEP;
      yield pos;
    }
    start = pos;
    const op = bytes[pos++]!;
    switch (op) {
      // ---- the hot ones first: what a snapshot is made of ----
      case 0x6a: // LONG_BINGET
        if (len - pos < 4) truncated(4);
        push(memoGet(dv.getUint32(pos, true)));
        pos += 4;
        break;
      case 0x68: // BINGET
        if (pos >= len) truncated(1);
        push(memoGet(bytes[pos++]!));
        break;
      case 0x94: // MEMOIZE
        memoPut(memoSize);
        break;
      case 0x28: // MARK
        marks.push(base);
        base = sp;
        break;
      case 0x7d: // EMPTY_DICT
        push({});
        break;
      case 0x75: {
        // SETITEMS
        const m = popMark();
        if (m - base < 1) underflow(1);
        setItems(m - 1, m);
        break;
      }
      case 0x8a: {
        // LONG1
        if (pos >= len) truncated(1);
        const n = bytes[pos++]!;
        if (len - pos < n) truncated(n);
        push(decodeLong(bytes, pos, n));
        pos += n;
        break;
      }
      case 0x4b: // BININT1
        if (pos >= len) truncated(1);
        push(bytes[pos++]!);
        break;
      case 0x4d: // BININT2
        if (len - pos < 2) truncated(2);
        push(bytes[pos]! | (bytes[pos + 1]! << 8));
        pos += 2;
        break;
      case 0x4a: // BININT
        if (len - pos < 4) truncated(4);
        push(dv.getInt32(pos, true));
        pos += 4;
        break;
      case 0x5d: // EMPTY_LIST
        push([]);
        break;
      case 0x8c: {
        // SHORT_BINUNICODE
        if (pos >= len) truncated(1);
        const n = bytes[pos++]!;
        if (len - pos < n) truncated(n);
        push(decodeUtf8(bytes, pos, pos + n, start));
        pos += n;
        break;
      }
      case 0x65: // APPENDS
      case 0x90: {
        // ADDITEMS
        const m = popMark();
        if (m - base < 1) underflow(1);
        appendItems(m - 1, m);
        break;
      }

      // ---- framing and protocol ----
      case 0x80: {
        // PROTO
        if (pos >= len) truncated(1);
        const version = bytes[pos++]!;
        if (version > 5) fail(`unsupported pickle protocol ${version} (memplan reads protocols 2 to 5)`);
        break;
      }
      case 0x95: {
        // FRAME: the frame's contents are ordinary opcodes; only check that the frame fits in the input.
        if (len - pos < 8) truncated(8);
        const n = readU64(pos);
        pos += 8;
        if (n > len - pos) {
          fail(`truncated pickle: FRAME announces ${n} bytes but only ${len - pos} remain (the file was cut short)`);
        }
        break;
      }
      case 0x2e: {
        // STOP
        if (sp <= base) fail('malformed pickle: STOP with nothing on the stack');
        let result = stack[sp - 1];
        if (replaced !== null) result = fixReplaced(result, replaced);
        return result as PickleValue;
      }

      // ---- stack manipulation ----
      case 0x30: // POP
        if (sp > base) sp--;
        else sp = popMark();
        break;
      case 0x31: // POP_MARK
        sp = popMark();
        break;
      case 0x32: // DUP
        if (sp <= base) underflow(1);
        push(stack[sp - 1]);
        break;

      // ---- memo ----
      case 0x71: // BINPUT
        if (pos >= len) truncated(1);
        memoPut(bytes[pos++]!);
        break;
      case 0x72: // LONG_BINPUT
        if (len - pos < 4) truncated(4);
        memoPut(dv.getUint32(pos, true));
        pos += 4;
        break;

      // ---- constants and numbers ----
      case 0x4e: // NONE
        push(null);
        break;
      case 0x88: // NEWTRUE
        push(true);
        break;
      case 0x89: // NEWFALSE
        push(false);
        break;
      case 0x8b: {
        // LONG4
        if (len - pos < 4) truncated(4);
        const n = dv.getInt32(pos, true);
        pos += 4;
        if (n < 0) fail(`malformed pickle: LONG4 with negative length ${n}`);
        if (len - pos < n) truncated(n);
        push(decodeLong(bytes, pos, n));
        pos += n;
        break;
      }
      case 0x47: // BINFLOAT
        if (len - pos < 8) truncated(8);
        push(dv.getFloat64(pos, false));
        pos += 8;
        break;

      // ---- strings and bytes ----
      case 0x58: {
        // BINUNICODE
        if (len - pos < 4) truncated(4);
        const n = dv.getUint32(pos, true);
        pos += 4;
        if (len - pos < n) truncated(n);
        push(decodeUtf8(bytes, pos, pos + n, start));
        pos += n;
        break;
      }
      case 0x8d: {
        // BINUNICODE8
        if (len - pos < 8) truncated(8);
        const n = readU64(pos);
        pos += 8;
        if (len - pos < n) truncated(n);
        push(decodeUtf8(bytes, pos, pos + n, start));
        pos += n;
        break;
      }
      case 0x43: {
        // SHORT_BINBYTES
        if (pos >= len) truncated(1);
        const n = bytes[pos++]!;
        if (len - pos < n) truncated(n);
        push(bytes.slice(pos, pos + n));
        pos += n;
        break;
      }
      case 0x42: {
        // BINBYTES
        if (len - pos < 4) truncated(4);
        const n = dv.getUint32(pos, true);
        pos += 4;
        if (len - pos < n) truncated(n);
        push(bytes.slice(pos, pos + n));
        pos += n;
        break;
      }
      case 0x8e: // BINBYTES8
      case 0x96: {
        // BYTEARRAY8
        if (len - pos < 8) truncated(8);
        const n = readU64(pos);
        pos += 8;
        if (len - pos < n) truncated(n);
        push(bytes.slice(pos, pos + n));
        pos += n;
        break;
      }

      // ---- containers ----
      case 0x29: // EMPTY_TUPLE
      case 0x8f: // EMPTY_SET
        push([]);
        break;
      case 0x85: // TUPLE1
        if (sp - base < 1) underflow(1);
        stack[sp - 1] = [stack[sp - 1]];
        break;
      case 0x86: // TUPLE2
        if (sp - base < 2) underflow(2);
        sp--;
        stack[sp - 1] = [stack[sp - 1], stack[sp]];
        break;
      case 0x87: // TUPLE3
        if (sp - base < 3) underflow(3);
        sp -= 2;
        stack[sp - 1] = [stack[sp - 1], stack[sp], stack[sp + 1]];
        break;
      case 0x74: // TUPLE
      case 0x91: // FROZENSET
      case 0x6c: // LIST
        push(pops(popMark()));
        break;
      case 0x64: {
        // DICT
        const items = pops(popMark());
        push({});
        for (const item of items) push(item);
        setItems(sp - 1 - items.length, sp - items.length);
        break;
      }
      case 0x73: // SETITEM
        if (sp - base < 3) underflow(3);
        setItems(sp - 3, sp - 2);
        break;
      case 0x61: // APPEND
        if (sp - base < 2) underflow(2);
        appendItems(sp - 2, sp - 1);
        break;

      // ---- everything else is refused ----
      case 0x63: // GLOBAL
      case 0x69: {
        // INST
        const name = readGlobalName(bytes, pos);
        fail(`pickle opcode ${opLabel(op)} would import the Python object ${name}: ${PLAIN_ONLY}`);
        break;
      }
      case 0x93: {
        // STACK_GLOBAL
        const a = stack[sp - 2];
        const b = stack[sp - 1];
        const name =
          sp - base >= 2 && typeof a === 'string' && typeof b === 'string' ? `"${a}.${b}"` : 'named on the stack';
        fail(`pickle opcode ${opLabel(op)} would import the Python object ${name}: ${PLAIN_ONLY}`);
        break;
      }
      default: {
        const name = OPCODE_NAMES[op];
        if (name === undefined) {
          fail(`unknown pickle opcode byte ${hex2(op)}: the input is not a pickle, or it is corrupt`);
        } else if (TEXT_OPCODES.has(op)) {
          fail(
            `pickle opcode ${opLabel(op)} belongs to the old text protocols 0/1 (or Python 2), ` +
              `which memplan does not read; ${PLAIN_ONLY} (protocols 2 to 5)`,
          );
        } else {
          fail(`pickle opcode ${opLabel(op)} builds a Python object: ${PLAIN_ONLY}`);
        }
      }
    }
  }
}

function readGlobalName(bytes: Uint8Array, pos: number): string {
  // GLOBAL and INST are followed by "module\nname\n".
  const parts: string[] = [];
  let p = pos;
  for (let part = 0; part < 2; part++) {
    let s = '';
    for (;;) {
      if (p >= bytes.length || p - pos > 512) return 'named after it';
      const c = bytes[p++]!;
      if (c === 0x0a) break;
      s += c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : '?';
    }
    parts.push(s);
  }
  return `"${parts[0]}.${parts[1]}"`;
}

// ---- integers ----

const TWO_32 = 4294967296;

/** A little-endian two's-complement integer of n bytes (LONG1/LONG4): number if safe, else bigint. */
function decodeLong(b: Uint8Array, p: number, n: number): number | bigint {
  if (n <= 8) {
    if (n === 0) return 0;
    const top = b[p + n - 1]!;
    if (n <= 4) {
      let v = b[p]!;
      if (n > 1) v |= b[p + 1]! << 8;
      if (n > 2) v |= b[p + 2]! << 16;
      if (n > 3) return v | (b[p + 3]! << 24); // 4 bytes of two's complement: the int32 itself
      return top & 0x80 ? v - (1 << (8 * n)) : v;
    }
    // The low 4 bytes unsigned, the 1 to 4 bytes above them as a signed high part.
    const lo = (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0;
    let hi = b[p + 4]!;
    if (n > 5) hi |= b[p + 5]! << 8;
    if (n > 6) hi |= b[p + 6]! << 16;
    if (n > 7) hi |= b[p + 7]! << 24;
    else if (top & 0x80) hi -= 1 << (8 * (n - 4));
    // hi * 2^32 is exact; the sum is exact whenever the true value is a safe integer, and when it is not,
    // the rounded sum is not a safe integer either.
    const v = hi * TWO_32 + lo;
    if (v <= Number.MAX_SAFE_INTEGER && v >= Number.MIN_SAFE_INTEGER) return v;
  }
  let hex = '';
  for (let i = n - 1; i >= 0; i--) {
    const c = b[p + i]!;
    hex += (c < 16 ? '0' : '') + c.toString(16);
  }
  let big = BigInt('0x' + hex);
  if (b[p + n - 1]! & 0x80) big -= BigInt(1) << BigInt(8 * n);
  if (big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(big);
  return big;
}

// ---- strings ----

// TextDecoder exists in browsers, workers and Node, but is not part of ES2023: reach it through globalThis.
interface Utf8Decoder {
  decode(input: Uint8Array): string;
}
type Utf8DecoderConstructor = new (label: string, options: { fatal: boolean }) => Utf8Decoder;

let textDecoder: Utf8Decoder | null | undefined;

function getTextDecoder(): Utf8Decoder | null {
  if (textDecoder === undefined) {
    const ctor = (globalThis as { TextDecoder?: Utf8DecoderConstructor }).TextDecoder;
    textDecoder = typeof ctor === 'function' ? new ctor('utf-8', { fatal: true }) : null;
  }
  return textDecoder;
}

const SHORT_STRING = 32;
const CHUNK = 4096;

/** Decodes bytes[start, end) as UTF-8 the way pickle wrote it ('surrogatepass'). */
function decodeUtf8(b: Uint8Array, start: number, end: number, opOffset: number): string {
  const n = end - start;
  if (n <= SHORT_STRING) {
    // ASCII fast path: short strings are most of a snapshot (keys, actions, file and function names).
    let s = '';
    for (let i = start; i < end; i++) {
      const c = b[i]!;
      if (c >= 0x80) return decodeUtf8Slow(b, start, end, opOffset);
      s += String.fromCharCode(c);
    }
    return s;
  }
  let ascii = true;
  for (let i = start; i < end; i++) {
    if (b[i]! >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) {
    let s = '';
    for (let i = start; i < end; i += CHUNK) {
      s += String.fromCharCode.apply(null, b.subarray(i, Math.min(end, i + CHUNK)) as unknown as number[]);
    }
    return s;
  }
  const td = getTextDecoder();
  if (td !== null) {
    try {
      return td.decode(b.subarray(start, end));
    } catch {
      // Lone surrogates (valid for pickle, not for TextDecoder) or invalid UTF-8: the slow path sorts them out.
    }
  }
  return decodeUtf8Slow(b, start, end, opOffset);
}

function decodeUtf8Slow(b: Uint8Array, start: number, end: number, opOffset: number): string {
  const bad = (at: number): never => {
    throw new PickleError(
      `malformed pickle: invalid UTF-8 in the string of the opcode at byte ${opOffset}`,
      at,
    );
  };
  const units: number[] = [];
  let out = '';
  let i = start;
  while (i < end) {
    const c = b[i]!;
    if (c < 0x80) {
      units.push(c);
      i++;
    } else if (c >= 0xc2 && c <= 0xdf) {
      if (i + 1 >= end) bad(i);
      const c1 = b[i + 1]!;
      if ((c1 & 0xc0) !== 0x80) bad(i);
      units.push(((c & 0x1f) << 6) | (c1 & 0x3f));
      i += 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      if (i + 2 >= end) bad(i);
      const c1 = b[i + 1]!;
      const c2 = b[i + 2]!;
      if ((c1 & 0xc0) !== 0x80 || (c2 & 0xc0) !== 0x80) bad(i);
      const cp = ((c & 0x0f) << 12) | ((c1 & 0x3f) << 6) | (c2 & 0x3f);
      if (cp < 0x800) bad(i); // overlong; surrogates (0xd800-0xdfff) are allowed, as with 'surrogatepass'
      units.push(cp);
      i += 3;
    } else if (c >= 0xf0 && c <= 0xf4) {
      if (i + 3 >= end) bad(i);
      const c1 = b[i + 1]!;
      const c2 = b[i + 2]!;
      const c3 = b[i + 3]!;
      if ((c1 & 0xc0) !== 0x80 || (c2 & 0xc0) !== 0x80 || (c3 & 0xc0) !== 0x80) bad(i);
      const cp = ((c & 0x07) << 18) | ((c1 & 0x3f) << 12) | ((c2 & 0x3f) << 6) | (c3 & 0x3f);
      if (cp < 0x10000 || cp > 0x10ffff) bad(i);
      const v = cp - 0x10000;
      units.push(0xd800 + (v >> 10), 0xdc00 + (v & 0x3ff));
      i += 4;
    } else {
      bad(i);
    }
    if (units.length >= CHUNK) {
      out += String.fromCharCode.apply(null, units);
      units.length = 0;
    }
  }
  if (units.length > 0) out += String.fromCharCode.apply(null, units);
  return out;
}

// ---- dicts that became Maps ----

/** Replaces every reference to a dict that was turned into a Map (see setItemSlow). Iterative, cycle-safe. */
function fixReplaced(root: unknown, replaced: Map<object, PickleMap>): unknown {
  const swap = (v: unknown): unknown => {
    if (v !== null && typeof v === 'object') {
      const r = replaced.get(v);
      if (r !== undefined) return r;
    }
    return v;
  };
  const top = swap(root);
  const seen = new Set<unknown>();
  const todo: unknown[] = [top];
  while (todo.length > 0) {
    const x = todo.pop();
    if (x === null || typeof x !== 'object' || x instanceof Uint8Array || seen.has(x)) continue;
    seen.add(x);
    if (Array.isArray(x)) {
      for (let i = 0; i < x.length; i++) {
        const v = swap(x[i]);
        x[i] = v;
        todo.push(v);
      }
    } else if (x instanceof Map) {
      for (const [k, v] of x) {
        const nv = swap(v);
        if (nv !== v) x.set(k, nv);
        todo.push(k, nv);
      }
    } else {
      const o = x as { [key: string]: unknown };
      for (const k of Object.keys(o)) {
        const v = swap(o[k]);
        if (v !== o[k]) {
          if (k === '__proto__') Object.defineProperty(o, k, { value: v, writable: true, enumerable: true, configurable: true });
          else o[k] = v;
        }
        todo.push(v);
      }
    }
  }
  return top;
}
