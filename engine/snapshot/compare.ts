/**
 * Traces in a form two runs can be compared in: allocations numbered in the order they were made, frees by
 * that number, segment events by size (addresses differ between runs). Runs of consecutive frees are sorted:
 * they leave the same allocator state in any order (merging free neighbours is order-free), and PyTorch frees
 * some in hash-map order (the autocast cache), which no simulator can know.
 */
export interface ComparableEvent {
  action: string;
  addr: number;
  size: number;
}

export function comparableTrace(events: readonly ComparableEvent[]): string[] {
  const ids = new Map<number, number>();
  let allocations = 0;
  const out: string[] = [];
  let run: string[] = [];
  for (const e of events) {
    if (e.action === 'free_requested') continue;
    if (e.action === 'alloc') ids.set(e.addr, ++allocations);
    if (e.action === 'free_completed') {
      run.push(`free ${ids.get(e.addr)}`);
      continue;
    }
    out.push(...run.sort());
    run = [];
    out.push(e.action === 'alloc' ? `alloc ${ids.get(e.addr)} ${e.size}` : `${e.action} ${e.size}`);
  }
  return [...out, ...run.sort()];
}
