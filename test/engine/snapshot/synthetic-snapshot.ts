/**
 * A PyTorch memory snapshot of any length, written as `torch.cuda.memory._dump_snapshot()` writes it (pickle
 * protocol 4: a dict with `segments`, `device_traces` and `allocator_settings`; appends in batches of 1000, as
 * pickle batches them). For the tests that need millions of events (progress, cancel, bounds), which no recorded
 * fixture has. The trace is one that PyTorch's allocator would write: a 2 MiB small-pool segment, then rounds of
 * `blocksPerRound` 512-byte tensors allocated and freed, so a replay stays in step with it event for event.
 */

const SEGMENT_ADDR = 0x7f3a_0000_0000; // a typical CUDA address (above 2^32: written as LONG1, as Python does)

export interface SyntheticSnapshotOptions {
  /** Rounds of allocations and frees (each round is 3 × blocksPerRound events). */
  rounds: number;
  blocksPerRound?: number;
}

class PickleWriter {
  private buf = new Uint8Array(1 << 16);
  length = 0;

  private ensure(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
  }

  op(...bytes: number[]): void {
    this.ensure(bytes.length);
    for (const b of bytes) this.buf[this.length++] = b;
  }

  str(s: string): void {
    // SHORT_BINUNICODE (ASCII only here)
    this.op(0x8c, s.length, ...Array.from(s, (c) => c.charCodeAt(0)));
  }

  int(v: number): void {
    if (v >= 0 && v < 256) this.op(0x4b, v); // BININT1
    else if (v >= 0 && v < 2 ** 31) this.op(0x4a, v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, (v >>> 24) & 0xff); // BININT
    else {
      // LONG1 with 8 bytes, little-endian (non-negative: the top byte stays below 0x80)
      const lo = v % 2 ** 32;
      const hi = Math.floor(v / 2 ** 32);
      this.op(0x8a, 8, lo & 0xff, (lo >>> 8) & 0xff, (lo >>> 16) & 0xff, (lo >>> 24) & 0xff, hi & 0xff, (hi >>> 8) & 0xff, (hi >>> 16) & 0xff, (hi >>> 24) & 0xff);
    }
  }

  bytes(): Uint8Array {
    return this.buf.slice(0, this.length);
  }
}

const MARK = 0x28;
const EMPTY_DICT = 0x7d;
const EMPTY_LIST = 0x5d;
const SETITEMS = 0x75;
const APPENDS = 0x65;

/** The pickle's bytes (not gzipped) and how many trace events it holds. */
export function syntheticSnapshot({ rounds, blocksPerRound = 64 }: SyntheticSnapshotOptions): { bytes: Uint8Array; events: number } {
  const w = new PickleWriter();
  w.op(0x80, 4); // PROTO 4
  w.op(EMPTY_DICT, MARK);
  w.str('segments');
  w.op(EMPTY_LIST);
  w.str('device_traces');
  w.op(EMPTY_LIST, MARK, EMPTY_LIST); // [[ events ]]
  let time = 1_700_000_000_000_000;
  let events = 0;
  let inBatch = 0;
  const event = (action: string, addr: number, size: number) => {
    if (inBatch === 0) w.op(MARK);
    w.op(EMPTY_DICT, MARK);
    w.str('action');
    w.str(action);
    w.str('addr');
    w.int(addr);
    w.str('size');
    w.int(size);
    w.str('stream');
    w.int(0);
    w.str('time_us');
    w.int(time++);
    w.str('frames');
    w.op(EMPTY_LIST);
    w.op(SETITEMS);
    events++;
    if (++inBatch === 1000) {
      w.op(APPENDS);
      inBatch = 0;
    }
  };
  event('segment_alloc', SEGMENT_ADDR, 2 * 1024 * 1024);
  for (let r = 0; r < rounds; r++) {
    for (let b = 0; b < blocksPerRound; b++) event('alloc', SEGMENT_ADDR + 512 * b, 512);
    for (let b = 0; b < blocksPerRound; b++) {
      event('free_requested', SEGMENT_ADDR + 512 * b, 512);
      event('free_completed', SEGMENT_ADDR + 512 * b, 512);
    }
  }
  if (inBatch > 0) w.op(APPENDS);
  w.op(APPENDS); // the device list: one device
  w.str('allocator_settings');
  w.op(EMPTY_DICT);
  w.op(SETITEMS);
  w.op(0x2e); // STOP
  return { bytes: w.bytes(), events };
}
