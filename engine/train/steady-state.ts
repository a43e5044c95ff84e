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
 * at 85 and 86 memplan reproduces every step's peaks to the byte, step 5 rising above step 4 at 86. At 84 and 87 it
 * does not, and the cause is not the step count: the CUDA driver placed the 9th to 12th segments upwards into a
 * gap (the same relative addresses in two processes), memplan places every segment top-down
 * (allocator/device-memory.ts), so two equal 66 MiB segments are ordered the other way, a 1,179,648 B weight
 * gradient in step 1's backward takes the other one's free tail (best fit breaks ties by address), and memplan runs
 * out in step 3 at 87 (real: step 5) and in step 7 at 84 (real: fits 12 steps).
 */
import type { Block } from '../allocator/block.ts';
import type { CachingAllocator } from '../allocator/caching-allocator.ts';
import type { SimulatedDevice } from '../allocator/device-memory.ts';

/**
 * Everything that decides the next step's allocations, as one string (equal strings: equal futures): the
 * segments of `allocator.segments()` in address order, each block's address, size and state, read straight from
 * the blocks (this runs after every step).
 */
export function steadyStateKey(allocator: CachingAllocator, device: SimulatedDevice, convPlans: ReadonlyMap<string, readonly number[]>): string {
  const segments: { address: number; head: Block }[] = [];
  for (const head of allocator.segmentHeads()) {
    let first: Block | null = head;
    while (first && !first.mapped) first = first.next;
    if (first) segments.push({ address: first.ptr, head });
  }
  segments.sort((a, b) => a.address - b.address);
  const parts: string[] = [device.addressSpaceKey()];
  for (const { address, head } of segments) {
    parts.push(`S${address}:${head.stream}:${head.pool.isSmall ? 'small' : 'large'}:${head.expandableSegment !== null ? 'e' : ''}`);
    for (let b: Block | null = head; b; b = b.next) {
      if (!b.mapped) continue;
      parts.push(`${b.ptr}+${b.size}${b.allocated ? `a${b.requestedSize}` : allocator.isPendingFree(b) ? 'p' : ''}`);
    }
  }
  for (const [key, sizes] of [...convPlans].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) parts.push(`${key}=${sizes.join(',')}`);
  return parts.join(' ');
}
