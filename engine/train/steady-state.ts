/**
 * Note [Steady state]: how many training steps a "fits" verdict needs.
 *
 * A real run fits only if every step fits, and the first steps are not the worst: optimizer state appears in
 * step 1, and the caching allocator's free blocks keep moving for several steps after. Measured on the H100
 * (test/fixtures/boundary-suite/recordings/resnet18_fp32_sgd_224_cap2g_b87*): ResNet-18 fp32 under a 2 GiB cap at
 * batch 87 runs 4 steps and runs out of memory in step 5, with step 4's peak reserved no higher than step 3's.
 * So "the peak reserved stopped rising for one step" does not prove that later steps fit.
 *
 * What does prove it: every step after the first runs the same program (the same tensors, the same order), and
 * the caching allocator is deterministic. If the allocator's whole state at the end of step k (every segment and
 * block with its address, size and whether it is handed out; the device's address space, which places the next
 * segment; the cuDNN plans cached after a workspace failed) equals its state at the end of an earlier step j,
 * then step k+1 repeats step j+1 event for event, and so on for ever: no later step can peak higher or run out.
 * That is the stop rule (`steadyStateKey`). Garbage collection (`garbage_collection_threshold`) ages cached blocks
 * by a counter that never repeats, so with it on the state never provably repeats and the simulation runs to its
 * step limit.
 *
 * Recorded for 12 steps in fresh processes (recordings/resnet18_fp32_sgd_224_cap2g_b8{4,5,6}_12steps, b87_6steps_run1/2):
 * at 85 and 86 memplan reproduces every step's peaks to the byte, step 5 rising above step 4 at 86. At 87 memplan
 * runs out in step 5, as both processes did, with segments placed as the CUDA driver places them (Note [cudaMalloc
 * placement]; placed top-down, two equal 66 MiB segments were ordered the other way, a 1,179,648 B weight gradient
 * in step 1's backward took the other one's free tail, and memplan ran out in step 3). At 84 memplan runs out in
 * step 7 where the H100 ran 12 steps (not the step count: the simulation runs them; the allocation that differs is
 * not yet found).
 */
import type { Block } from '../allocator/block.ts';
import type { CachingAllocator } from '../allocator/caching-allocator.ts';
import type { SimulatedDevice } from '../allocator/device-memory.ts';

/** A block's state in `AllocatorState.numbers`. */
const kFree = 0;
const kPendingFree = 1;
const kAllocated = 2;

/**
 * Everything that decides the next step's allocations (Note [Steady state]): the cuDNN plans as text (short), and
 * as numbers the device's address space (`SimulatedDevice.addressSpaceState`: where the next segment lands) then
 * the segments of `allocator.segments()` in address order, read straight from the blocks: per segment its address,
 * stream, pool (1: small), whether expandable (1) and its number of mapped blocks, then per block its address,
 * size, state (free, pending free, allocated) and requested size (0 unless allocated). Equal states: equal futures.
 * This runs after every step: numbers, not a string of every block and range, are what it builds.
 */
export interface AllocatorState {
  /** The cached plans by key, as `key=size,size` joined by spaces. */
  readonly convPlans: string;
  readonly numbers: Float64Array;
  /** How many of the numbers, first, are the address space's. */
  readonly addressSpaceNumbers: number;
}

/** Numbers collected for one state (grown as needed; one state is read at a time). */
let scratch = new Float64Array(4096);

/** The allocator's state after a step, as AllocatorState says (what decides every step after it). */
export function allocatorState(allocator: CachingAllocator, device: SimulatedDevice, convPlans: ReadonlyMap<string, readonly number[]>): AllocatorState {
  const segments: { address: number; head: Block }[] = [];
  for (const head of allocator.segmentHeads()) {
    let first: Block | null = head;
    while (first && !first.mapped) first = first.next;
    if (first) segments.push({ address: first.ptr, head });
  }
  segments.sort((a, b) => a.address - b.address);
  let out = scratch;
  let n = 0;
  const put = (x: number) => {
    if (n === out.length) {
      const grown = new Float64Array(2 * out.length);
      grown.set(out);
      out = scratch = grown;
    }
    out[n++] = x;
  };
  device.addressSpaceState(put);
  const addressSpaceNumbers = n;
  for (const { address, head } of segments) {
    put(address);
    put(head.stream);
    put(head.pool.isSmall ? 1 : 0);
    put(head.expandableSegment !== null ? 1 : 0);
    const countAt = n;
    put(0);
    let count = 0;
    for (let b: Block | null = head; b; b = b.next) {
      if (!b.mapped) continue;
      count++;
      put(b.ptr);
      put(b.size);
      put(b.allocated ? kAllocated : allocator.isPendingFree(b) ? kPendingFree : kFree);
      put(b.allocated ? b.requestedSize : 0);
    }
    out[countAt] = count;
  }
  const plans = convPlans.size === 0 ? '' : [...convPlans].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([key, sizes]) => `${key}=${sizes.join(',')}`).join(' ');
  return { convPlans: plans, numbers: out.slice(0, n), addressSpaceNumbers };
}

/** The state as one string (equal strings: equal states); the tests read it. */
export function steadyStateKey(allocator: CachingAllocator, device: SimulatedDevice, convPlans: ReadonlyMap<string, readonly number[]>): string {
  const { convPlans: plans, numbers, addressSpaceNumbers } = allocatorState(allocator, device, convPlans);
  const parts: string[] = [numbers.subarray(0, addressSpaceNumbers).join(',')];
  for (let i = addressSpaceNumbers; i < numbers.length; ) {
    parts.push(`S${numbers[i]}:${numbers[i + 1]}:${numbers[i + 2] === 1 ? 'small' : 'large'}:${numbers[i + 3] === 1 ? 'e' : ''}`);
    const count = numbers[i + 4]!;
    i += 5;
    for (let k = 0; k < count; k++, i += 4) {
      const state = numbers[i + 2];
      parts.push(`${numbers[i]}+${numbers[i + 1]}${state === kAllocated ? `a${numbers[i + 3]}` : state === kPendingFree ? 'p' : ''}`);
    }
  }
  if (plans !== '') parts.push(plans);
  return parts.join(' ');
}

/** The states steps ended in, to tell when one repeats (Note [Steady state]). */
export class SteadyStates {
  private readonly byHash = new Map<number, AllocatorState[]>();

  /** Keeps the state; whether an earlier step ended in the same one. */
  repeats(state: AllocatorState): boolean {
    const hash = hashOf(state.numbers);
    const same = this.byHash.get(hash);
    if (!same) {
      this.byHash.set(hash, [state]);
      return false;
    }
    if (same.some((s) => equalStates(s, state))) return true;
    same.push(state);
    return false;
  }
}

function equalStates(a: AllocatorState, b: AllocatorState): boolean {
  if (a.convPlans !== b.convPlans || a.numbers.length !== b.numbers.length || a.addressSpaceNumbers !== b.addressSpaceNumbers) return false;
  const x = a.numbers;
  const y = b.numbers;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** FNV-1a over the numbers' low and high 32 bits (addresses pass 2^32). */
function hashOf(numbers: Float64Array): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < numbers.length; i++) {
    const x = numbers[i]!;
    h = Math.imul(h ^ (x | 0), 0x01000193);
    h = Math.imul(h ^ ((x / 4294967296) | 0), 0x01000193);
  }
  return h;
}
