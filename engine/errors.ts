/**
 * Errors that the user's input caused (a bad plan, a corrupt snapshot, an impossible setting).
 * The edges (CLI, app) show `message` as it is: it names what is wrong and where. Anything else that is thrown
 * is a bug in memplan.
 */
export class InputError extends Error {
  /** Where in the input the problem is: a field path (`training.batch_size`) or a byte offset (`byte 1234`). */
  readonly where: string;
  /** What is wrong there, without the place. */
  readonly problem: string;

  constructor(where: string, problem: string) {
    super(where ? `${where}: ${problem}` : problem);
    this.name = 'InputError';
    this.where = where;
    this.problem = problem;
  }
}

/**
 * Several problems of one input (every issue of a plan), each at its field path. `message` lists them one a
 * line. A class instance does not survive `structuredClone`: the worker posts `issues`, plain objects.
 */
export class InputIssuesError extends InputError {
  readonly issues: readonly { path: string; message: string }[];

  constructor(issues: readonly { path: string; message: string }[]) {
    const first = issues[0] ?? { path: '', message: 'is not valid' };
    super(first.path, first.message);
    this.name = 'InputIssuesError';
    this.issues = issues;
    this.message = issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('\n');
  }
}

/** An input error as plain data (what crosses a worker boundary): `{message, where}`. */
export function plainError(error: InputError): { message: string; where: string } {
  return { message: error.message, where: error.where };
}

/** Levenshtein distance, for "did you mean". */
export function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const current = [i];
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j]! + 1, current[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    }
    previous = current;
  }
  return previous[b.length]!;
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
