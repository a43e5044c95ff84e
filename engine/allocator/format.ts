/** Sizes and the `torch.cuda.memory_summary()` text, formatted as PyTorch formats them. */
import type { DeviceStats, Stat } from './stats.ts';
import { STAT_TYPE_NAMES } from './stats.ts';

/** `c10::CachingAllocator::format_size`: "512 bytes", "1.50 KiB", "20.00 MiB", "1.25 GiB". */
export function formatSize(bytes: number): string {
  if (bytes <= 1024) return `${bytes} bytes`;
  if (bytes <= 1_048_576) return `${(bytes / 1024).toFixed(2)} KiB`;
  if (bytes <= 1_073_741_824) return `${(bytes / 1_048_576).toFixed(2)} MiB`;
  return `${(bytes / 1_073_741_824).toFixed(2)} GiB`;
}

/** `_format_size` of torch/cuda/memory.py's memory_summary: integer units chosen by the first column's value. */
function formatSummarySize(size: number, preferred: number): string {
  const prefixes = ['B  ', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let prefix = prefixes[0]!;
  for (const next of prefixes.slice(1)) {
    if (preferred < 768 * 1024) break;
    prefix = next;
    size = Math.floor(size / 1024);
    preferred /= 1024;
  }
  return `${String(size).padStart(6)} ${prefix}`;
}

function formatSummaryCount(count: number, preferred: number): string {
  const prefixes = [' ', 'K', 'M'];
  let prefix = prefixes[0]!;
  for (const next of prefixes.slice(1)) {
    if (preferred < 750 * 1000) break;
    prefix = next;
    count = Math.floor(count / 1000);
    preferred /= 1000;
  }
  return `${String(count).padStart(7)} ${prefix} `;
}

type Formatter = (value: number, preferred: number) => string;

/** `torch.cuda.memory_summary(abbreviated=False)`, line for line. */
export function memorySummary(stats: DeviceStats, device = 0, abbreviated = false): string {
  const lines: string[] = [];
  const rule = '-'.repeat(75);
  lines.push('='.repeat(75));
  lines.push(` ${''.padEnd(16)} PyTorch CUDA memory summary, device ID ${String(device).padEnd(17)} `);
  lines.push(rule);
  lines.push(
    `  ${''.padEnd(9)} CUDA OOMs: ${String(stats.num_ooms).padEnd(12)} | ${''.padEnd(6)} cudaMalloc retries: ${String(stats.num_alloc_retries).padEnd(8)}  `,
  );
  lines.push('='.repeat(75));
  lines.push('        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ');
  const row = (name: string, s: Stat, pref: Stat, f: Formatter) =>
    ` ${name.padEnd(21)} | ${f(s.current, pref.current)} | ${f(s.peak, pref.peak)} | ${f(s.allocated, pref.allocated)} | ${f(s.freed, pref.freed)} `;
  const perPool: [keyof DeviceStats & string, string, Formatter][] = [
    ['allocated_bytes', 'Allocated memory', formatSummarySize],
    ['active_bytes', 'Active memory', formatSummarySize],
    ['requested_bytes', 'Requested memory', formatSummarySize],
    ['reserved_bytes', 'GPU reserved memory', formatSummarySize],
    ['inactive_split_bytes', 'Non-releasable memory', formatSummarySize],
    ['allocation', 'Allocations', formatSummaryCount],
    ['active', 'Active allocs', formatSummaryCount],
    ['segment', 'GPU reserved segments', formatSummaryCount],
    ['inactive_split', 'Non-releasable allocs', formatSummaryCount],
  ];
  for (const [key, name, f] of perPool) {
    lines.push(rule);
    const array = stats[key] as [Stat, Stat, Stat];
    const all = array[0];
    lines.push(row(name, all, all, f));
    if (!abbreviated) {
      lines.push(row('      from large pool', array[STAT_TYPE_NAMES.indexOf('large_pool')]!, all, f));
      lines.push(row('      from small pool', array[STAT_TYPE_NAMES.indexOf('small_pool')]!, all, f));
    }
  }
  for (const [s, name] of [
    [stats.oversize_allocations, 'Oversize allocations'],
    [stats.oversize_segments, 'Oversize GPU segments'],
  ] as const) {
    lines.push(rule);
    lines.push(row(name, s, s, formatSummaryCount));
  }
  lines.push('='.repeat(75));
  return '|' + lines.join('|\n|') + '|\n';
}
