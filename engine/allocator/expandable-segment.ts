/**
 * `ExpandableSegment` (CUDACachingAllocator.cpp, Note [Expandable Segments]): a virtual address range of
 * 1.125 x the device's memory, backed page by page (2 MiB pages in the small pool, large_segment_size ones, 20 MiB
 * unless set, in the large pool) as the allocator maps them. One per (stream, pool).
 */
import type { DeviceMemory } from './device-memory.ts';

export interface SegmentRange {
  ptr: number;
  size: number;
}

export class ExpandableSegment {
  readonly ptr: number;
  /** Page size: 2 MiB (small pool) or large_segment_size (large pool). */
  readonly segmentSize: number;
  /** Pages the address range holds. */
  readonly maxHandles: number;
  /** Which pages are backed by physical memory; trimmed of unmapped pages at the end, as `handles_`. */
  private readonly handles: boolean[] = [];
  private readonly device: DeviceMemory;

  constructor(device: DeviceMemory, totalGlobalMemBytes: number, segmentSize: number) {
    this.device = device;
    this.segmentSize = segmentSize;
    // "we allocate enough address space for 1 1/8 the total memory on the GPU"
    const addressSpace = totalGlobalMemBytes + Math.floor(totalGlobalMemBytes / 8);
    this.maxHandles = Math.ceil(addressSpace / segmentSize);
    this.ptr = device.reserveAddressSpace(this.maxHandles * segmentSize);
  }

  /** Bytes of address space. */
  get size(): number {
    return this.maxHandles * this.segmentSize;
  }

  private segmentLeft(p: number): number {
    return Math.floor((p - this.ptr) / this.segmentSize);
  }

  private segmentRight(p: number): number {
    return Math.ceil((p - this.ptr) / this.segmentSize);
  }

  private rangeFromHandles(begin: number, end: number): SegmentRange {
    return { ptr: this.ptr + this.segmentSize * begin, size: this.segmentSize * (end - begin) };
  }

  /** `ExpandableSegment::map`: back [ptr, ptr+size) with pages; size 0 means out of memory. */
  map(range: SegmentRange): SegmentRange {
    const begin = this.segmentLeft(range.ptr);
    const end = this.segmentRight(range.ptr + range.size);
    if (begin === end) return this.rangeFromHandles(begin, end);
    while (this.handles.length < end) this.handles.push(false);
    for (let i = begin; i < end; i++) {
      if (this.handles[i]) throw new Error('expandable segment: page already mapped');
      if (!this.device.createPage(this.segmentSize)) {
        for (let j = begin; j < i; j++) {
          this.handles[j] = false;
          this.device.releasePage(this.segmentSize);
        }
        this.trimHandles();
        return this.rangeFromHandles(begin, begin);
      }
      this.handles[i] = true;
    }
    return this.rangeFromHandles(begin, end);
  }

  /** `ExpandableSegment::unmap`: release the pages lying wholly inside [ptr, ptr+size). */
  unmap(range: SegmentRange): SegmentRange {
    const begin = this.segmentRight(range.ptr);
    const end = this.segmentLeft(range.ptr + range.size);
    if (begin >= end) return { ptr: range.ptr, size: 0 };
    for (let i = begin; i < end; i++) {
      this.handles[i] = false;
      this.device.releasePage(this.segmentSize);
    }
    this.trimHandles();
    return this.rangeFromHandles(begin, end);
  }

  private trimHandles(): void {
    while (this.handles.length > 0 && !this.handles[this.handles.length - 1]) this.handles.pop();
  }
}
