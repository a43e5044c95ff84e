/**
 * The GPU as the allocator sees it through the CUDA driver: `cudaMalloc`/`cudaFree` of whole segments, and
 * for expandable segments `cuMemAddressReserve` (virtual addresses, free) plus `cuMemCreate` pages (physical).
 * The caching allocator never sees the CUDA context or other processes: `capacityBytes` is what is left for it.
 *
 * Addresses: CUDA chooses them; they matter only to break ties between equally sized free blocks in different
 * segments (best fit takes the lowest address), which decides fragmentation. The driver's placement is not
 * documented; in the 37 traces recorded on the H100 (test/fixtures) a new segment lay below the previous one
 * 1634 times and above it 905 times. memplan therefore hands out addresses top-down, first fit from the highest
 * free range, aligned to 2 MiB: with it every simulated calibration run matches the real one allocation for
 * allocation, where bottom-up addresses broke the token-MLP run.
 * Replays use the real addresses where the trace has them (see snapshot/replay.ts).
 */
const kAddressAlignment = 2_097_152;
const kDeviceAddressBase = 0x7f00_0000_0000; // where CUDA places device memory on Linux x86-64

export interface DeviceMemory {
  /** Bytes the allocator may still take from the device (physical). */
  readonly freeBytes: number;
  /** `cudaMalloc(size)`: the segment's address, or null for cudaErrorMemoryAllocation. */
  malloc(size: number): number | null;
  /** `cudaFree`. */
  free(ptr: number, size: number): void;
  /** `cuMemAddressReserve`: virtual address space only. */
  reserveAddressSpace(size: number): number;
  /** `cuMemCreate` of one physical page; false when the device is out of memory. */
  createPage(size: number): boolean;
  /** `cuMemRelease` of one page. */
  releasePage(size: number): void;
}

/** A free-list of address ranges, first fit. */
class AddressSpace {
  private next = kDeviceAddressBase;
  private readonly holes: { ptr: number; size: number }[] = [];

  take(size: number): number {
    const aligned = Math.ceil(size / kAddressAlignment) * kAddressAlignment;
    for (let i = this.holes.length - 1; i >= 0; i--) {
      const hole = this.holes[i]!;
      if (hole.size >= aligned) {
        hole.size -= aligned;
        const ptr = hole.ptr + hole.size;
        if (hole.size === 0) this.holes.splice(i, 1);
        return ptr;
      }
    }
    this.next -= aligned;
    return this.next;
  }

  /** The free ranges and the lowest address handed out: where every later segment will land. */
  key(): string {
    return `${this.next}|${this.holes.map((h) => `${h.ptr}+${h.size}`).join(',')}`;
  }

  give(ptr: number, size: number): void {
    const aligned = Math.ceil(size / kAddressAlignment) * kAddressAlignment;
    let i = 0;
    while (i < this.holes.length && this.holes[i]!.ptr < ptr) i++;
    this.holes.splice(i, 0, { ptr, size: aligned });
    const after = this.holes[i + 1];
    if (after && ptr + aligned === after.ptr) {
      this.holes[i]!.size += after.size;
      this.holes.splice(i + 1, 1);
    }
    const before = this.holes[i - 1];
    if (before && before.ptr + before.size === ptr) {
      before.size += this.holes[i]!.size;
      this.holes.splice(i, 1);
    }
  }
}

/** A device with `capacityBytes` of memory available to the allocator. */
export class SimulatedDevice implements DeviceMemory {
  private usedBytes = 0;
  private readonly addresses = new AddressSpace();
  /** What the allocator may take; the replay of an OOM sets it to what the real device had left. */
  capacityBytes: number;

  constructor(capacityBytes: number = Number.POSITIVE_INFINITY) {
    this.capacityBytes = capacityBytes;
  }

  get freeBytes(): number {
    return this.capacityBytes - this.usedBytes;
  }

  malloc(size: number): number | null {
    if (this.usedBytes + size > this.capacityBytes) return null;
    this.usedBytes += size;
    return this.addressFor(size);
  }

  free(ptr: number, size: number): void {
    this.usedBytes -= size;
    this.releaseAddress(ptr, size);
  }

  /** Where a new segment lands (first fit in a fixed address range). */
  protected addressFor(size: number): number {
    return this.addresses.take(size);
  }

  protected releaseAddress(ptr: number, size: number): void {
    this.addresses.give(ptr, size);
  }

  /** The address space's state, for Note [Steady state] (engine/train/steady-state.ts). */
  addressSpaceKey(): string {
    return this.addresses.key();
  }

  reserveAddressSpace(size: number): number {
    return this.addresses.take(size);
  }

  createPage(size: number): boolean {
    if (this.usedBytes + size > this.capacityBytes) return false;
    this.usedBytes += size;
    return true;
  }

  releasePage(size: number): void {
    this.usedBytes -= size;
  }
}
