/**
 * Errors that the user's input caused (a bad plan, a corrupt snapshot, an impossible setting).
 * The edges (CLI, app) show `message` as it is: it names what is wrong and where. Anything else that is thrown
 * is a bug in memplan.
 */
export class InputError extends Error {
  /** Where in the input the problem is: a field path (`training.batch_size`) or a byte offset (`byte 1234`). */
  readonly where: string;

  constructor(where: string, problem: string) {
    super(where ? `${where}: ${problem}` : problem);
    this.name = 'InputError';
    this.where = where;
  }
}

/** A schema issue's path as a field name: `training.batch_size`, `gpus[3].total_memory_bytes`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : i === 0 ? String(p) : `.${String(p)}`)).join('');
}

/** What a zod schema issue means, in words for a user. */
export function describeSchemaIssue(issue: {
  code: string;
  message: string;
  input?: unknown;
  expected?: string;
  keys?: string[];
  values?: unknown[];
}): string {
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? `is required (${issue.expected})` : `expected ${issue.expected}`;
    case 'unrecognized_keys':
      return `unknown key${(issue.keys ?? []).length > 1 ? 's' : ''} ${(issue.keys ?? []).map((k) => `"${k}"`).join(', ')}`;
    case 'invalid_value':
      return `expected one of ${(issue.values ?? []).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'invalid_union':
      return 'does not match any accepted form';
    default:
      return issue.message;
  }
}
