/**
 * A plan's problems as values: every one of them, each at its field path (`training.batch_size`,
 * `model.layers[2].out_features`) with a message that says what was given, what is accepted, and "did you mean"
 * where a known name is close. A plan editor shows them all beside their fields; the CLI prints them one a line.
 *
 * Note [Union issues]: zod reports a value that matches no member of a union (the model's five forms, the GPU's
 * two, a layer's types) as one issue holding every member's issues. The member the user meant is the one with the
 * fewest of them, a missing key or an unknown key weighing more than a wrong value (they say "another form"), so
 * `{"torchvision": "efficientnet_b0"}` is told about the torchvision names, not that `preset` is required.
 */
import type { z } from 'zod';
import { InputError, editDistance, fieldPath } from '../errors.ts';
import type { Issue } from '../result/common.ts';

type ZodIssue = z.core.$ZodIssue;
type Path = readonly PropertyKey[];

/** A zod issue, with the input zod saw (`reportInput`). */
type IssueWithInput = ZodIssue & { input?: unknown };

/** The value at `path` inside `root` (undefined where the path leaves the value). */
function valueAt(root: unknown, path: Path): unknown {
  let v = root;
  for (const key of path) {
    if (typeof v !== 'object' || v === null) return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

/** How a given value reads in a message: `"8" (text)`, `1.5`, `null`. */
function given(value: unknown): string {
  if (typeof value === 'string') return `"${value}" (text)`;
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object' && value !== null) return 'an object';
  return String(value);
}

const TYPE_WORDS: Record<string, string> = {
  number: 'a number',
  int: 'a whole number',
  string: 'text',
  boolean: 'true or false',
  array: 'a list',
  object: 'an object',
  record: 'an object',
};

/** The closest of `names` to `wanted`, when it is close (a third of the characters at most). */
export function closest(wanted: string, names: readonly string[]): string | undefined {
  let best: { name: string; distance: number } | undefined;
  for (const name of names) {
    const distance = editDistance(wanted.toLowerCase(), name.toLowerCase());
    if (best === undefined || distance < best.distance) best = { name, distance };
  }
  return best && best.distance <= Math.max(1, Math.floor(wanted.length / 3)) ? best.name : undefined;
}

const didYouMean = (wanted: unknown, names: readonly string[]) => {
  const c = typeof wanted === 'string' ? closest(wanted, names.filter((n) => n !== wanted)) : undefined;
  return c ? `; did you mean "${c}"?` : '';
};

/** The keys an object schema accepts, for "did you mean" on an unknown key (every member's, for a union). */
function objectKeys(schema: z.core.$ZodType | undefined, value: unknown): string[] {
  const def = schema?._zod.def as unknown as Record<string, unknown> | undefined;
  if (!def) return [];
  switch (def['type']) {
    case 'object':
      return Object.keys(def['shape'] as object);
    case 'union': {
      const options = def['options'] as z.core.$ZodType[];
      const discriminator = def['discriminator'] as string | undefined;
      const tag = discriminator && typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[discriminator] : undefined;
      // a layer: the member its `type` selects
      const matching = discriminator && tag !== undefined
        ? options.filter((o) => ((o._zod.def as unknown as { shape?: Record<string, z.ZodType> }).shape?.[discriminator]?.safeParse(tag).success ?? false))
        : options;
      return [...new Set((matching.length ? matching : options).flatMap((o) => objectKeys(o, value)))];
    }
    case 'lazy':
      return objectKeys((def['getter'] as () => z.core.$ZodType)(), value);
    case 'optional':
    case 'default':
    case 'nullable':
    case 'prefault':
      return objectKeys(def['innerType'] as z.core.$ZodType, value);
    case 'pipe':
      return objectKeys(def['in'] as z.core.$ZodType, value);
    default:
      return [];
  }
}

/** The schema of the field at `path` (following objects, arrays, unions by the value's shape). */
function schemaAt(schema: z.core.$ZodType, path: Path, value: unknown): z.core.$ZodType | undefined {
  let s: z.core.$ZodType | undefined = schema;
  let v = value;
  for (const key of path) {
    s = unwrap(s, v);
    if (!s) return undefined;
    const def = s._zod.def as unknown as Record<string, unknown>;
    if (def['type'] === 'object') s = (def['shape'] as Record<PropertyKey, z.core.$ZodType>)[key];
    else if (def['type'] === 'array') s = def['element'] as z.core.$ZodType;
    else return undefined;
    v = typeof v === 'object' && v !== null ? (v as Record<PropertyKey, unknown>)[key] : undefined;
  }
  return s;
}

/** Through wrappers and lazies, and into the union member whose keys the value has most of. */
/** The forms of an object schema (a union's members, else the object itself): the keys each takes and requires. */
function formsOf(schema: z.core.$ZodType | undefined): { keys: string[]; required: string[] }[] {
  for (let s = schema, i = 0; s && i < 20; i++) {
    const def = s._zod.def as unknown as Record<string, unknown>;
    if (def['type'] === 'lazy') s = (def['getter'] as () => z.core.$ZodType)();
    else if (['optional', 'default', 'nullable', 'prefault'].includes(def['type'] as string)) s = def['innerType'] as z.core.$ZodType;
    else if (def['type'] === 'union') return (def['options'] as z.core.$ZodType[]).flatMap((o) => formsOf(o));
    else if (def['type'] === 'object') {
      const shape = def['shape'] as Record<string, z.core.$ZodType>;
      const optional = (t: z.core.$ZodType) => ['optional', 'default', 'prefault'].includes((t._zod.def as unknown as { type: string }).type);
      return [{ keys: Object.keys(shape), required: Object.keys(shape).filter((k) => !optional(shape[k]!)) }];
    } else return [];
  }
  return [];
}

function unwrap(schema: z.core.$ZodType | undefined, value: unknown): z.core.$ZodType | undefined {
  for (let s = schema, i = 0; s && i < 20; i++) {
    const def = s._zod.def as unknown as Record<string, unknown>;
    if (def['type'] === 'lazy') s = (def['getter'] as () => z.core.$ZodType)();
    else if (['optional', 'default', 'nullable', 'prefault'].includes(def['type'] as string)) s = def['innerType'] as z.core.$ZodType;
    else if (def['type'] === 'pipe') s = def['in'] as z.core.$ZodType;
    else if (def['type'] === 'union') {
      const keys = typeof value === 'object' && value !== null ? Object.keys(value) : [];
      const options = def['options'] as z.core.$ZodType[];
      const score = (o: z.core.$ZodType) => {
        const known = objectKeys(o, value);
        return keys.filter((k) => known.includes(k)).length - keys.filter((k) => !known.includes(k)).length;
      };
      s = options.reduce((a, b) => (score(b) > score(a) ? b : a));
    } else return s;
  }
  return undefined;
}

/**
 * What a union of plain values with names accepts, where every member failed on the value itself (one issue each,
 * a wrong type or a value not listed: `true`, `false` or one of an enum's names), or null: such a union is one list
 * of accepted values, not members to choose between (`training.activation_checkpointing`).
 */
function plainValuesAccepted(members: readonly (readonly ZodIssue[])[]): { words: string[]; strings: string[] } | null {
  const words: string[] = [];
  const strings: string[] = [];
  for (const issues of members) {
    const i = issues[0];
    if (issues.length !== 1 || i === undefined || i.path.length !== 0) return null;
    if (i.code === 'invalid_type') {
      if (i.expected === 'boolean') words.push('true', 'false');
      else if (TYPE_WORDS[i.expected] !== undefined) words.push(TYPE_WORDS[i.expected]!);
      else return null;
    } else if (i.code === 'invalid_value') {
      for (const v of i.values) {
        words.push(JSON.stringify(v));
        if (typeof v === 'string') strings.push(v);
      }
    } else return null;
  }
  // a union of objects given something else is told by its best member ("expected an object")
  return strings.length > 0 ? { words: [...new Set(words)], strings } : null;
}

/** The types a union's members take, when each member refused the value for its type alone (else none). */
function typesAccepted(members: readonly (readonly ZodIssue[])[]): string[] {
  const types = new Set<string>();
  for (const issues of members) {
    const i = issues[0];
    if (issues.length !== 1 || i === undefined || i.path.length !== 0 || i.code !== 'invalid_type' || TYPE_WORDS[i.expected] === undefined) return [];
    types.add(TYPE_WORDS[i.expected]!);
  }
  return [...types];
}

/** How far a union member's issues are from what the user meant (Note [Union issues]). */
function weight(issues: readonly ZodIssue[]): number {
  let w = 0;
  for (const i of issues) {
    // Deep inside the member (a layer of the list) the member itself was right: those weigh least.
    const depth = i.code === 'unrecognized_keys' ? i.path.length + 1 : i.path.length;
    const n = i.code === 'unrecognized_keys' ? i.keys.length : 1;
    const missing = (i.code === 'invalid_type' || i.code === 'invalid_value') && (i as IssueWithInput).input === undefined;
    w += depth > 1 ? 0.5 * n : i.code === 'unrecognized_keys' || missing ? 2 * n : n;
  }
  return w;
}

/**
 * A bound a value passed, in memplan's words where the schema gave none of its own (zod's default reads "Too big:
 * expected number to be <=20"): "must be at most 20", "must be positive", "must have at least 1 item".
 */
function boundWords(issue: ZodIssue): string {
  if (!/^Too (big|small):/.test(issue.message)) return issue.message;
  const b = issue as ZodIssue & { origin?: string; maximum?: number | bigint; minimum?: number | bigint; inclusive?: boolean };
  const big = issue.code === 'too_big';
  const limit = Number(big ? b.maximum : b.minimum);
  if (b.origin === 'array' || b.origin === 'set') return `must have ${big ? 'at most' : 'at least'} ${limit} item${limit === 1 ? '' : 's'}`;
  if (b.origin === 'string') return `must have ${big ? 'at most' : 'at least'} ${limit} character${limit === 1 ? '' : 's'}`;
  if (!big && limit === 0 && b.inclusive === false) return 'must be positive';
  if (big) return b.inclusive === false ? `must be less than ${limit}` : `must be at most ${limit}`;
  return b.inclusive === false ? `must be more than ${limit}` : `must be at least ${limit}`;
}

/** A zod issue as the user's issues: unions resolved to their member, unknown keys one per key. */
function flatten(issue: ZodIssue, prefix: Path, root: unknown, schema: z.core.$ZodType, out: Issue[]): void {
  const path = [...prefix, ...issue.path];
  const input = (issue as IssueWithInput).input;
  switch (issue.code) {
    case 'invalid_union': {
      const u = issue as ZodIssue & { note?: string; options?: unknown[]; discriminator?: string };
      if (u.note === 'No matching discriminator' || (issue.errors.length === 0 && u.options)) {
        const names = (u.options ?? []).map(String);
        const value = valueAt(root, path);
        const what = u.discriminator === 'type' && path.includes('layers') ? 'layer type' : (u.discriminator ?? 'value');
        const message =
          value === undefined
            ? `is required: one of ${names.join(', ')}`
            : `unknown ${what} ${JSON.stringify(value)}; accepted: ${names.join(', ')}${didYouMean(value, names)}`;
        out.push({ path: fieldPath(path), message });
        return;
      }
      if (issue.errors.length === 0) break;
      const accepted = plainValuesAccepted(issue.errors);
      if (accepted) {
        const value = valueAt(root, path);
        const names = accepted.strings;
        // the enum's own words (invalid_value below), so the same translation reads both
        const message = value === undefined ? `is required: one of ${accepted.words.join(', ')}` : `expected one of ${accepted.words.join(', ')}; got ${given(value)}${didYouMean(value, names)}`;
        out.push({ path: fieldPath(path), message });
        return;
      }
      const types = typesAccepted(issue.errors);
      const value = valueAt(root, path);
      if (types.length > 1 && value !== undefined) {
        // members of different types, none of which the value is: "expected a list or text, got 5"
        out.push({ path: fieldPath(path), message: `expected ${types.join(' or ')}, got ${given(value)}` });
        return;
      }
      const best = issue.errors.reduce((a, b) => (weight(b) < weight(a) ? b : a));
      for (const inner of best) flatten(inner, path, root, schema, out);
      return;
    }
    case 'unrecognized_keys': {
      const value = valueAt(root, path);
      const here = schemaAt(schema, path, root);
      const known = objectKeys(here, value);
      const forms = formsOf(here);
      for (const key of issue.keys) {
        // a key another form of this object takes (a union's member: a model's preset and hf_config together):
        // the keys given that some form requires and no form takes together with it
        const present = typeof value === 'object' && value !== null ? Object.keys(value).filter((k) => k !== key && !issue.keys.includes(k)) : [];
        const given = present.filter((k) => forms.some((f) => f.required.includes(k)) && !forms.some((f) => f.keys.includes(key) && f.keys.includes(k)));
        const message = known.includes(key) && given.length
          ? `"${key}" cannot be given with ${given.map((k) => `"${k}"`).join(' and ')}: give one of them`
          : `unknown key "${key}"${didYouMean(key, known) || (known.length ? `; accepted here: ${known.join(', ')}` : '')}`;
        out.push({ path: fieldPath([...path, key]), message });
      }
      return;
    }
    case 'invalid_type': {
      const expected = TYPE_WORDS[issue.expected] ?? issue.expected;
      if (input === undefined) out.push({ path: fieldPath(path), message: `is required (${expected})` });
      else if (issue.expected === 'int' && typeof input === 'number') out.push({ path: fieldPath(path), message: `must be a whole number, got ${input}` });
      else out.push({ path: fieldPath(path), message: `expected ${expected}, got ${given(input)}` });
      return;
    }
    case 'invalid_value': {
      const values = issue.values.map((v) => JSON.stringify(v));
      const message =
        input === undefined
          ? `is required: ${values.length === 1 ? values[0] : `one of ${values.join(', ')}`}`
          : issue.values.length === 1
          ? `expected ${values[0]}, got ${given(input)}`
          : `expected one of ${values.join(', ')}; got ${given(input)}${didYouMean(input, issue.values.map(String))}`;
      out.push({ path: fieldPath(path), message });
      return;
    }
    case 'too_small':
    case 'too_big':
      out.push({ path: fieldPath(path), message: `${boundWords(issue)}${input !== undefined && !Array.isArray(input) ? `, got ${given(input)}` : ''}` });
      return;
  }
  out.push({ path: fieldPath(path), message: issue.message });
}

/** Every problem zod found, as issues (in the order of the fields). */
export function schemaIssues(error: z.core.$ZodError, root: unknown, schema: z.core.$ZodType, prefix: Path = []): Issue[] {
  const out: Issue[] = [];
  for (const issue of error.issues) flatten(issue, prefix, root, schema, out);
  // one issue per (path, message)
  const seen = new Set<string>();
  return out.filter((i) => {
    const key = `${i.path}\u0000${i.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** An InputError as an issue: its field path and its problem. */
export function issueOf(error: InputError): Issue {
  return { path: error.where, message: error.problem };
}

/** Issues as text, one a line (`path: message`). */
export function formatIssues(issues: readonly Issue[]): string {
  return issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join('\n');
}
