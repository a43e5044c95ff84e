/**
 * The GPU as the allocator sees it through the CUDA driver: `cudaMalloc`/`cudaFree` of whole segments, and
 * for expandable segments `cuMemAddressReserve` (virtual addresses, free) plus `cuMemCreate` pages (physical).
 * The caching allocator never sees the CUDA context or other processes: `capacityBytes` is what is left for it.
 *
 * Addresses: CUDA chooses them; they matter only to break ties between equally sized free blocks in different
 * segments (best fit takes the lowest address), which decides fragmentation. Plan simulation places segments as
 * the driver was measured to (Note [cudaMalloc placement], CudaDriverAddressSpace); devices above 16 TiB (custom
 * ones, and the unbounded device of `needed_bytes`: engine/train/simulate.ts) hand them out top-down, first fit from
 * the highest free range (TopDownAddressSpace), what plan simulation used until the published Gemma 2 2B showed the
 * driver's rule exact where top-down reserved 3.3% too little. Either way expandable segments' ranges go upward, each
 * above the last (Note [cuMemAddressReserve placement]). Replays use the real addresses where the trace has them (see
 * snapshot/replay.ts).
 */

/*
 * Note [cudaMalloc placement]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * The driver (580.159, CUDA 13, H100) is not documented here; this is what it was measured to do.
 * resources/measure/probe_segment_placement.py replayed the segment_alloc/segment_free sequence of all 80
 * recordings under test/fixtures (traces, calibration, boundary-suite: 5,907 segments) with plain cuMemAlloc/
 * cuMemFree in a fresh process each, /proc/self/maps read after every call (test/fixtures/device/
 * h100_segment_placement.json). The rule below gives every address of 79 of the 80 sequences (5,772 segments;
 * test/engine/allocator/cuda-driver-placement.test.ts). In the 80th that process had a free gap above the
 * context's range, which took its third segment (the same rule: the highest gap), and all later ones lie one
 * reservation (32 MiB) higher:
 *
 * - Device memory lives in virtual address reservations that the driver mmaps from the process's address space
 *   (unified addressing): the CUDA context's own range (512 MiB, with 2 MiB and 24 MiB still free near its top
 *   when PyTorch takes its first segment) and, below it, one reservation per cudaMalloc that finds no room,
 *   rounded up to 32 MiB and aligned to 32 MiB. Linux places mmaps top-down: the reservation lands at the top of
 *   the highest free gap that is larger than it (a gap of exactly its size is passed over).
 * - A cudaMalloc first looks for room in the reservations, newest first; inside one it takes the smallest free
 *   range that fits (best fit; the lowest address on a tie) and places the segment at that range's bottom,
 *   2 MiB aligned. So a new reservation is filled bottom-up: a 20 MiB segment leaves 12 MiB above it in its
 *   32 MiB, which the next small cudaMalloc takes.
 * - cudaFree returns the range to its reservation; a reservation left empty is unmapped, and its addresses go
 *   back to the gaps later reservations are placed in.
 *
 * In a training process other mappings share that address space: the host's own mmaps (a model built on the
 * CPU and freed tensor by tensor as `.to("cuda")` moves it leaves gaps above the context's range that later
 * reservations fall into: mixtral_4l_amp_bf16_ckpt's 6th segment lands 10 GiB above its first) and, at times,
 * room the driver frees inside the context's range. Over the real recordings the rule puts 94.8% of the pairs of
 * segments of one pool in the real order, as the clean replays of the same sequences do; top-down first fit,
 * 93.1%. Plan simulation follows the rule. Against the calibration runs it makes exact what top-down first fit
 * missed: gemma2_2b_bf16_adamw_s512 (top-down: reserved -3.3%), bert_base_fp32_ckpt_reentrant_sgd (+0.59%),
 * phi3_4l_bf16_ckpt_reentrant_sgdm (+0.29%), resnet50_amp_bf16_ckpt_adamw and tinyllama_4l_amp_bf16_ckpt_fused
 * event for event, and the ResNet-18 2 GiB search finds the real 87 (top-down: 86). It misses where top-down did
 * not: layers_transformer_amp_bf16_ckpt_adam_forloop reserves 1.35% less than the H100. mixtral_4l_amp_bf16_ckpt
 * is 2.85% above with either. Simulating these with the real run's segment addresses makes them exact, so what is
 * missing is the host's mappings (the CPU copy of the model freed as it moves), not the rule.
 *
 * Those mappings were read (resources/measure/probe_host_maps.py: /proc/self/maps before every tensor `.to("cuda")`
 * moves; test/fixtures/device/h100_host_maps.json, checked in test/engine/allocator/host-maps.test.ts). Built by
 * from_config, the CPU copy is one run of glibc mmaps laid top-down in creation order, above the context's range
 * (it exists before CUDA does); `.to("cuda")` frees it
 * from the top, and the driver's reservations fill that growing gap top-down, then go on below the context. While
 * every reservation fits the gap this is the order the rule gives (TinyLlama: exact). Mixtral's 224 MiB expert
 * weights do not fit the gap when their turn comes and go below; the 112 MiB ones after them do fit, above: the
 * order the rule misses. Loaded by from_pretrained, unconverted tensors are views of the mmapped safetensors file
 * (unmapped whole at the end of the move), while the expert weights transformers fuses while loading are fresh
 * mmaps placed among its loader threads' stacks and arenas. For a dense model loaded that way, every tensor a view of
 * the file (Qwen2.5 1.5B), the driver's range lands right below it at torch.cuda.init(), the context's range above
 * the file, and the reservations fill the room between them top-down until less than 64 MiB (a reservation and
 * its alignment) is left; then they go on below the driver's range, past the file and the range at once (11 to 16
 * GiB lower in five recordings at published sizes). How much room the loader leaves above the file decides where
 * that jump falls. Simulating that would mean simulating glibc and the loader's thread pool; memplan does not
 * (docs/engine.md; test/engine/allocator/host-maps.test.ts).
 */

/** Where segments land: `take` for cudaMalloc, `give` for cudaFree, `reserveAddressSpace` for cuMemAddressReserve. */
interface AddressModel {
  take(size: number): number;
  give(ptr: number, size: number): void;
  reserveAddressSpace(size: number): number;
  /**
   * The state that decides where later segments land, for Note [Steady state], as numbers given one by one to
   * `put` (every list preceded by its length: equal sequences, equal states).
   */
  state(put: (x: number) => void): void;
}

const kPageBytes = 2_097_152; // bytes: cudaMalloc hands out whole 2 MiB pages on the H100
const kReservationBytes = 33_554_432; // bytes: the driver reserves address space in multiples of 32 MiB, so aligned
const kDeviceAddressTop = 0x7f00_0000_0000; // device memory lies below this on Linux x86-64 (the context's range, too)
const kAddressFloor = -(2 ** 52); // the lowest address handed out (a multiple of 32 MiB; see CudaDriverAddressSpace)
const kContextRangeBytes = 536_870_912; // bytes: the CUDA context's own reservation (512 MiB)
/** Where the context's range still had room when the first segment came: offset from its base, and size. */
const kContextRangeFree: readonly { offset: number; size: number }[] = [
  { offset: 434_110_464, size: 2_097_152 }, // a 2 MiB hole at +414 MiB
  { offset: 511_705_088, size: 25_165_824 }, // 24 MiB at +488 MiB
];

interface AddressRange {
  ptr: number;
  size: number;
}

/*
 * Note [cuMemAddressReserve placement]
 * ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
 * An expandable segment reserves its address range with cuMemAddressReserve (no address asked for, no alignment),
 * which the driver does not place as it places cudaMalloc's mmaps (Note [cudaMalloc placement]): measured on the H100
 * (test/fixtures/boundary-suite/recordings/gpt2_large_amp_bf16_adamw_seq1024_expandable_whole_gpu_b15_10steps), the
 * large pool's first segment came at 0x302000000, the small pool's right above its end at the next 32 MiB boundary,
 * and the large pool's second (made in step 6, when the first had no address space left for 2.88 GiB) right above
 * that: bottom-up, each at the next 32 MiB boundary. Only the order matters to the allocator (best fit breaks ties
 * between equal blocks by address), and the order is what top-down placement got backwards: a second segment below
 * the first, so equal free blocks were taken from it first, the run's layout drifted from the H100's and its step 7
 * ran out of memory where the H100's ran until step 9. A segment's range is not given back (PyTorch frees it only
 * when a segment is wholly unmapped, which the runs here never did).
 */
const kFirstReservation = 0x3_0200_0000; // bytes: where the H100's first cuMemAddressReserve landed

/** cuMemAddressReserve's placement (Note [cuMemAddressReserve placement]): upward from the first, 32 MiB aligned. */
class ReservationsUpward {
  private next = kFirstReservation;

  reserve(size: number): number {
    const ptr = this.next;
    this.next = roundUp(ptr + size, kReservationBytes);
    return ptr;
  }

  state(put: (x: number) => void): void {
    put(this.next);
  }
}

/** One mmapped virtual address reservation of the driver and the ranges inside it that no segment holds. */
interface Reservation {
  /** Order of creation (the search goes newest first). */
  readonly serial: number;
  readonly ptr: number;
  readonly size: number;
  /** Segments placed in it; at 0 the driver unmaps it (unless it is the context's). */
  segments: number;
  /** Free ranges, by address. */
  readonly free: AddressRange[];
  /** The size of the largest of them (0: none): a cudaMalloc larger than it looks no further here. */
  largestFree: number;
  /** The context's range: never unmapped. */
  readonly permanent: boolean;
}

function roundUp(bytes: number, granularity: number): number {
  return Math.ceil(bytes / granularity) * granularity;
}

/** A list of ranges as numbers: its length, then each range's address and size. */
function putRanges(put: (x: number) => void, ranges: readonly AddressRange[]): void {
  put(ranges.length);
  for (const r of ranges) {
    put(r.ptr);
    put(r.size);
  }
}

function largestRange(ranges: readonly AddressRange[]): number {
  let largest = 0;
  for (const r of ranges) if (r.size > largest) largest = r.size;
  return largest;
}

/** Inserts [ptr, ptr+size) into ranges sorted by address, merging it with its neighbours. */
function insertRange(ranges: AddressRange[], ptr: number, size: number): void {
  let i = 0;
  while (i < ranges.length && ranges[i]!.ptr < ptr) i++;
  ranges.splice(i, 0, { ptr, size });
  const after = ranges[i + 1];
  if (after && ptr + size === after.ptr) {
    ranges[i]!.size += after.size;
    ranges.splice(i + 1, 1);
  }
  const before = ranges[i - 1];
  if (before && before.ptr + before.size === ptr) {
    before.size += ranges[i]!.size;
    ranges.splice(i, 1);
  }
}

/** The process's device address space as the driver manages it: Note [cudaMalloc placement]. */
export class CudaDriverAddressSpace implements AddressModel {
  /** The base of the CUDA context's own range (test/fixtures/device/h100_segment_placement.json counts from it). */
  readonly contextRangeBase = kDeviceAddressTop - kContextRangeBytes;
  /** Reservations, oldest first. */
  private readonly reservations: Reservation[] = [];
  /** The reservations with free room, oldest first: what cudaMalloc searches (newest first). */
  private readonly withRoom: Reservation[] = [];
  /** The reservation of each segment, by its address. */
  private readonly owners = new Map<number, Reservation>();
  private serials = 0;
  /** Unmapped address space below the context's range, by address. */
  private readonly gaps: AddressRange[] = [];
  /** Expandable segments' ranges (cuMemAddressReserve). */
  private readonly reservedUpward = new ReservationsUpward();
  /**
   * At least the largest free range of any reservation (exact after a search that found no room): a cudaMalloc
   * larger than it takes a new reservation without searching. A process holds hundreds of reservations with a
   * little room left (a 20 MiB segment leaves 12 MiB of its 32 MiB), and most segments are larger than that.
   */
  private roomAtMost: number;

  constructor() {
    const base = this.contextRangeBase;
    const context: Reservation = {
      serial: this.serials++,
      ptr: base,
      size: kContextRangeBytes,
      segments: 0,
      free: kContextRangeFree.map((r) => ({ ptr: base + r.offset, size: r.size })),
      largestFree: Math.max(...kContextRangeFree.map((r) => r.size)),
      permanent: true,
    };
    this.reservations.push(context);
    this.withRoom.push(context);
    this.roomAtMost = context.largestFree;
    // below 0 too: expandable segments reserve 1.125 x the device's memory each, which a simulated device of
    // unbounded capacity can make larger than the 127 TiB below kDeviceAddressTop
    this.gaps.push({ ptr: kAddressFloor, size: base - kAddressFloor });
  }

  /** `cudaMalloc`'s address: room in a reservation (newest first, best fit inside it), else a new reservation. */
  take(size: number): number {
    const bytes = roundUp(size, kPageBytes);
    let largest = 0;
    for (let r = bytes <= this.roomAtMost ? this.withRoom.length - 1 : -1; r >= 0; r--) {
      const reservation = this.withRoom[r]!;
      if (reservation.largestFree < bytes) {
        if (reservation.largestFree > largest) largest = reservation.largestFree;
        continue;
      }
      let best: AddressRange | null = null;
      for (const range of reservation.free) {
        if (range.size >= bytes && (best === null || range.size < best.size)) best = range;
      }
      if (best === null) continue;
      const ptr = best.ptr;
      best.ptr += bytes;
      best.size -= bytes;
      if (best.size === 0) {
        reservation.free.splice(reservation.free.indexOf(best), 1);
        if (reservation.free.length === 0) this.withRoom.splice(r, 1);
      }
      reservation.largestFree = largestRange(reservation.free);
      reservation.segments++;
      this.owners.set(ptr, reservation);
      return ptr;
    }
    if (bytes <= this.roomAtMost) this.roomAtMost = largest; // every reservation with room was searched
    const reservation = this.reserve(roundUp(size, kReservationBytes));
    reservation.segments = 1;
    if (reservation.size > bytes) {
      reservation.free.push({ ptr: reservation.ptr + bytes, size: reservation.size - bytes });
      reservation.largestFree = reservation.size - bytes;
      this.withRoom.push(reservation); // the newest
      this.roomAtMost = Math.max(this.roomAtMost, reservation.largestFree);
    }
    this.owners.set(reservation.ptr, reservation);
    return reservation.ptr;
  }

  /** `cudaFree`: the range goes back to its reservation, and an emptied reservation is unmapped. */
  give(ptr: number, size: number): void {
    const reservation = this.owners.get(ptr);
    if (!reservation) return;
    this.owners.delete(ptr);
    if (reservation.free.length === 0) {
      // back among the reservations with room, in creation order
      let i = this.withRoom.length;
      while (i > 0 && this.withRoom[i - 1]!.serial > reservation.serial) i--;
      this.withRoom.splice(i, 0, reservation);
    }
    insertRange(reservation.free, ptr, roundUp(size, kPageBytes));
    reservation.largestFree = largestRange(reservation.free);
    this.roomAtMost = Math.max(this.roomAtMost, reservation.largestFree);
    reservation.segments--;
    if (reservation.segments === 0 && !reservation.permanent) {
      this.reservations.splice(this.reservations.indexOf(reservation), 1);
      this.withRoom.splice(this.withRoom.indexOf(reservation), 1);
      insertRange(this.gaps, reservation.ptr, reservation.size);
    }
  }

  /** `cuMemAddressReserve`: a range of its own, never shared with cudaMalloc's segments (Note [cuMemAddressReserve placement]). */
  reserveAddressSpace(size: number): number {
    return this.reservedUpward.reserve(size);
  }

  /** A new mmap of `size` bytes: the top of the highest gap larger than it, 32 MiB aligned. */
  private reserve(size: number): Reservation {
    for (let g = this.gaps.length - 1; g >= 0; g--) {
      const gap = this.gaps[g]!;
      if (gap.size <= size) continue;
      const ptr = Math.floor((gap.ptr + gap.size - size) / kReservationBytes) * kReservationBytes;
      if (ptr < gap.ptr) continue;
      const above = { ptr: ptr + size, size: gap.ptr + gap.size - ptr - size };
      const below = { ptr: gap.ptr, size: ptr - gap.ptr };
      this.gaps.splice(g, 1, ...[below, above].filter((range) => range.size > 0));
      const reservation: Reservation = { serial: this.serials++, ptr, size, segments: 0, free: [], largestFree: 0, permanent: false };
      this.reservations.push(reservation);
      return reservation;
    }
    throw new Error(`no virtual address space left for ${size} bytes`);
  }

  /** The reservations in creation order with their free ranges, and the gaps: where every later segment will land. */
  state(put: (x: number) => void): void {
    put(this.reservations.length);
    for (const r of this.reservations) {
      put(r.ptr);
      put(r.size);
      putRanges(put, r.free);
    }
    putRanges(put, this.gaps);
    this.reservedUpward.state(put);
  }
}

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

/** Top-down first fit from the highest free range, 2 MiB aligned: the unbounded device's placement (and allocator tests'). */
class TopDownAddressSpace implements AddressModel {
  private next = kDeviceAddressTop;
  private readonly reservedUpward = new ReservationsUpward();
  /** Free ranges below `next`, by address. */
  private readonly holes: AddressRange[] = [];

  take(size: number): number {
    const aligned = roundUp(size, kPageBytes);
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

  /** The lowest address handed out and the free ranges: where every later segment will land. */
  state(put: (x: number) => void): void {
    put(this.next);
    putRanges(put, this.holes);
    this.reservedUpward.state(put);
  }

  /** cuMemAddressReserve: Note [cuMemAddressReserve placement]. */
  reserveAddressSpace(size: number): number {
    return this.reservedUpward.reserve(size);
  }

  give(ptr: number, size: number): void {
    insertRange(this.holes, ptr, roundUp(size, kPageBytes));
  }
}

/** A device with `capacityBytes` of memory available to the allocator. */
export class SimulatedDevice implements DeviceMemory {
  private usedBytes = 0;
  private readonly addresses: AddressModel;
  /** What the allocator may take; the replay of an OOM sets it to what the real device had left. */
  capacityBytes: number;

  /** `placement`: 'cuda-driver' (Note [cudaMalloc placement]: plan simulation's) or 'top-down' (TopDownAddressSpace). */
  constructor(capacityBytes: number = Number.POSITIVE_INFINITY, placement: 'top-down' | 'cuda-driver' = 'top-down') {
    this.capacityBytes = capacityBytes;
    this.addresses = placement === 'cuda-driver' ? new CudaDriverAddressSpace() : new TopDownAddressSpace();
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

  /** Where a new segment lands. */
  protected addressFor(size: number): number {
    return this.addresses.take(size);
  }

  protected releaseAddress(ptr: number, size: number): void {
    this.addresses.give(ptr, size);
  }

  /** The address space's state, for Note [Steady state] (engine/train/steady-state.ts): numbers given to `put`. */
  addressSpaceState(put: (x: number) => void): void {
    this.addresses.state(put);
  }


  reserveAddressSpace(size: number): number {
    return this.addresses.reserveAddressSpace(size);
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
