/**
 * `memplan replay`: the what-if under the replayed settings is the comparison's run (one definition), and a trace
 * recorded under a cap the replay was not given says so, with the cap's range and how to pass it (issue 13).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { replayResultSchema } from '../../engine/index.ts';
import { json, memplan, root } from './support.ts';

const traces = join(root, 'test/fixtures/traces');
const names = readdirSync(traces).filter((f) => f.endsWith('.pickle.gz')).map((f) => f.replace(/\.pickle\.gz$/, '')).sort();
/** The measurement beside each trace (resources/measure/memplan_measure.py): its settings and the cap it ran under. */
const meta = (name: string) => JSON.parse(readFileSync(join(traces, `${name}.json`), 'utf8')) as { alloc_conf: string | null; cap: { allowed_bytes: number | null } };
const replay = (...args: string[]) => replayResultSchema.parse(json(['replay', ...args, '--json']));

describe('replay', () => {
  it('the what-if under the replayed settings repeats the comparison: peaks and out-of-memory, for every recorded trace', () => {
    expect(names.length).toBeGreaterThanOrEqual(7);
    for (const name of names) {
      const m = meta(name);
      const cap = m.cap.allowed_bytes;
      for (const args of [cap === null ? [] : ['--memory-limit', String(cap)], []]) {
        const r = replay(join(traces, `${name}.pickle.gz`), '--alloc-conf', m.alloc_conf ?? '', '--what-if', m.alloc_conf ?? '', '--what-if', 'expandable_segments:True', ...args);
        const same = r.what_if.find((w) => w.alloc_conf === r.alloc_conf)!;
        expect(same, name).toBeDefined();
        expect(same.peak_reserved_bytes, `${name} ${args}`).toBe(r.sim_peak_reserved_bytes);
        expect(same.peak_allocated_bytes, `${name} ${args}`).toBe(r.sim_peak_allocated_bytes);
        expect(same.oom_at_event !== null, `${name} ${args}`).toBe(r.sim_oom);
      }
    }
  });

  it('oom_under_cap with its cap: out of memory in the table and in the (defaults) what-if alike', () => {
    const cap = meta('oom_under_cap').cap.allowed_bytes!;
    const file = join(traces, 'oom_under_cap.pickle.gz');
    const r = replay(file, '--memory-limit', String(cap));
    expect(r.real_oom).toBe(true);
    expect(r.sim_oom).toBe(true);
    expect(r.segment_event_mismatches).toBe(0);
    const defaults = r.what_if.find((w) => w.alloc_conf === '')!;
    expect(defaults.oom_at_event).not.toBeNull();
    expect(defaults.peak_reserved_bytes).toBe(r.sim_peak_reserved_bytes);
    expect(r.likely_cap).toBeNull(); // the cap was given
    const text = memplan(['replay', file, '--memory-limit', String(cap)]).stdout;
    expect(text).toMatch(/^out of memory {4}yes {11}yes$/m);
    expect(text).toMatch(/^ {2}\(PyTorch defaults\) \[as replayed\] +peak reserved [\d.]+ GiB, out of memory at event \d+$/m);
    expect(text).not.toContain('empty_cache() calls found');
  });

  it('oom_under_cap without its cap: says a cap is the likely reason, its range, and how to pass it', () => {
    const cap = meta('oom_under_cap').cap.allowed_bytes!;
    const file = join(traces, 'oom_under_cap.pickle.gz');
    const r = replay(file);
    expect(r.segment_event_mismatches).toBeGreaterThan(0);
    const likely = r.likely_cap!;
    expect(likely).not.toBeNull();
    expect(likely.at_least_bytes).toBe(r.real_peak_reserved_bytes);
    expect(cap).toBeGreaterThanOrEqual(likely.at_least_bytes);
    expect(cap).toBeLessThan(likely.below_bytes);
    expect(likely.oom_event).toBe(r.first_mismatch!.event_index);
    // the release before the failing allocation is its retry, not an empty_cache() call
    expect(r.empty_cache_calls).toContain(likely.retry_release_event);
    // the (defaults) what-if is the table's run here too
    expect(r.what_if.find((w) => w.alloc_conf === '')!.peak_reserved_bytes).toBe(r.sim_peak_reserved_bytes);
    const text = memplan(['replay', file]).stdout;
    expect(text).toContain(`The real run was most likely capped: its out-of-memory error at event ${likely.oom_event} had room on the device`);
    expect(text).toContain(`least ${(likely.at_least_bytes / 2 ** 30).toFixed(2)} GiB (${likely.at_least_bytes} bytes) and below`);
    expect(text).toContain(`memplan replay ${file} --memory-limit <F x total_memory, in bytes>`);
    expect(text).not.toContain('empty_cache() calls found'); // 0 both with and without the cap
  });

  it('a trace recorded without a cap raises no cap hint', () => {
    for (const name of names.filter((n) => meta(n).cap.allowed_bytes === null)) {
      expect(replay(join(traces, `${name}.pickle.gz`)).likely_cap ?? null, name).toBeNull();
    }
  });
});
