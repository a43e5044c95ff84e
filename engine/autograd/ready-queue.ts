/**
 * The autograd engine's ReadyQueue: a `std::priority_queue<NodeTask, vector, CompareNodeTaskTime>` ordered by
 * sequence_nr (latest first). Nodes of equal sequence_nr (every AccumulateGrad has UINT64_MAX) come out in
 * the order libstdc++'s binary heap gives them, so this is that heap, operation for operation
 * (`std::push_heap` / `std::pop_heap` of bits/stl_heap.h), not a stable sort.
 */
export class ReadyQueue<T extends { seq: number }> {
  private readonly heap: T[] = [];

  get size(): number {
    return this.heap.length;
  }

  /** CompareNodeTaskTime: a before b in the heap's "less" sense when a.seq < b.seq. */
  private static less(a: { seq: number }, b: { seq: number }): boolean {
    return a.seq < b.seq;
  }

  /** `__push_heap`: sift the hole up from `hole` to `top` and place `value`. */
  private pushHeap(hole: number, top: number, value: T): void {
    const h = this.heap;
    let parent = (hole - 1) >> 1;
    while (hole > top && ReadyQueue.less(h[parent]!, value)) {
      h[hole] = h[parent]!;
      hole = parent;
      parent = (hole - 1) >> 1;
    }
    h[hole] = value;
  }

  push(value: T): void {
    this.heap.push(value);
    this.pushHeap(this.heap.length - 1, 0, value);
  }

  /** `std::pop_heap` then pop_back: the top comes out; the last element is re-seated by `__adjust_heap`. */
  pop(): T {
    const h = this.heap;
    const top = h[0]!;
    const last = h.pop()!;
    const len = h.length;
    if (len === 0) return top;
    // __adjust_heap(first, 0, len, last)
    let hole = 0;
    let child = hole;
    while (child < ((len - 1) >> 1)) {
      child = 2 * (child + 1);
      if (ReadyQueue.less(h[child]!, h[child - 1]!)) child--;
      h[hole] = h[child]!;
      hole = child;
    }
    if ((len & 1) === 0 && child === ((len - 2) >> 1)) {
      child = 2 * (child + 1);
      h[hole] = h[child - 1]!;
      hole = child - 1;
    }
    this.pushHeap(hole, 0, last);
    return top;
  }
}
