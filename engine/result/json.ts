/**
 * Results as JSON (Note [Timeline JSON] in timeline.ts): typed arrays become plain arrays of numbers, which the
 * result schemas turn back into typed arrays. `--json`, the SQLite rows and the IPC payloads all go through this.
 */

/** A `JSON.stringify` replacer that writes typed arrays (a timeline's columns) as plain arrays. */
export function resultJsonReplacer(_key: string, value: unknown): unknown {
  return ArrayBuffer.isView(value) && !(value instanceof DataView) ? Array.from(value as unknown as ArrayLike<number>) : value;
}

/** One result as JSON text (no indentation: `--json` prints one object per line). */
export function stringifyResult(result: unknown, indent?: number): string {
  return JSON.stringify(result, resultJsonReplacer, indent);
}
