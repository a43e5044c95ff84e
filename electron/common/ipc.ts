/**
 * The IPC contract: one definition of each channel, its arguments and its result as zod schemas. Everything else
 * derives from it: the handlers' types (electron/main/handlers), the preload's `window.memplan` type
 * (`MemplanApi`), the test bridge's routes. No Electron import: the main process, the test bridge and the tests
 * all load it under plain Node, and the renderer imports its types (`import type { MemplanApi } from
 * '../../electron/common/ipc.ts'`).
 *
 * Conventions: snake_case fields (as the plan file and the engine's results); ids are UUIDs; times are ISO 8601
 * in UTC (`2026-11-24T03:40:00.000Z`); a verb with nothing to answer (a cancelled dialog) answers null.
 */
import { z } from 'zod';
import { type InvokeChannel, type MenuCommand } from './channels.ts';

export { INVOKE_CHANNELS, MENU_COMMANDS, MENU_COMMAND_CHANNEL, type InvokeChannel, type IpcAnswer, type IpcError, type MenuCommand } from './channels.ts';

// Limits: far above any real plan, low enough that a runaway renderer cannot fill the disk one save at a time.
export const MAX_NAME_CHARS = 200;
export const MAX_NOTES_CHARS = 100_000;
export const MAX_TAGS = 32;
export const MAX_TAG_CHARS = 64;
export const MAX_QUERY_CHARS = 200;
/** A plan file with a pasted Hugging Face config.json is a few kB; a layer list a few hundred. */
export const MAX_PLAN_JSON_BYTES = 4 * 1024 * 1024;
/** A result holds a decimated timeline (2,000 points x 8 columns): a few hundred kB as JSON. */
export const MAX_RESULT_JSON_BYTES = 32 * 1024 * 1024;
/** A text file the renderer may open (a plan, a config.json) or save (a plan, an export). */
export const MAX_TEXT_FILE_BYTES = 16 * 1024 * 1024;
/** A PyTorch memory snapshot (`torch.cuda.memory._dump_snapshot`): tens to hundreds of MB for long recordings. */
export const MAX_SNAPSHOT_BYTES = 1024 * 1024 * 1024;
/** An exported image (a chart as PNG): a 4K canvas at twice the pixel ratio is a few MB. */
export const MAX_IMAGE_BYTES = 32 * 1024 * 1024;
/** Images saved beside one report (its charts). */
export const MAX_REPORT_IMAGES = 16;

// ---------------------------------------------------------------------------------------------------------------
// Values

export const planIdSchema = z.uuid({ error: 'must be a plan id (a UUID)' });

export const planNameSchema = z
  .string({ error: 'must be text' })
  .trim()
  .min(1, 'must not be empty')
  .max(MAX_NAME_CHARS, `must be at most ${MAX_NAME_CHARS} characters`);

export const notesSchema = z.string({ error: 'must be text' }).max(MAX_NOTES_CHARS, `must be at most ${MAX_NOTES_CHARS} characters`);

/** Tags are trimmed; empty ones and repeats are dropped, order kept. */
export const tagsSchema = z
  .array(z.string({ error: 'must be text' }).trim().max(MAX_TAG_CHARS, `must be at most ${MAX_TAG_CHARS} characters`), { error: 'must be a list of tags' })
  .max(MAX_TAGS, `must be at most ${MAX_TAGS} tags`)
  .transform((tags) => [...new Set(tags.filter((t) => t.length > 0))]);

/**
 * The plan file's JSON as the user has it (`format: "memplan.plan"` ...), stored as given: a plan being edited may
 * be incomplete. The main process checks it with the engine's plan schema and records the answer (`plan_valid`).
 */
export const planJsonSchema = z.record(z.string(), z.unknown(), { error: 'must be a plan file object' });

/**
 * An engine result (engine/result/: `simulate`, `max_batch`, ...), stored as JSON with its kind and schema
 * version. Typed arrays (a timeline's columns) are stored as plain arrays (engine/result/json.ts, Note [Timeline
 * JSON]); reading a result back gives plain arrays, which the engine's result schemas turn back into typed arrays.
 */
export const resultJsonSchema = z.looseObject({
  kind: z.string({ error: 'must name the result kind' }).min(1).max(40),
  schema_version: z.number({ error: 'must be the result schema version' }).int().positive(),
});

/** What the list shows of a plan's stored result without loading it. */
export const resultSummarySchema = z.object({
  kind: z.string(),
  schema_version: z.number().int(),
  /** simulate: every step ran without OOM; max_batch: some batch fits. */
  fits: z.boolean().nullable(),
  /** simulate only. */
  peak_reserved_bytes: z.number().nullable(),
  /** max_batch only. */
  max_batch: z.number().int().nullable(),
});

export const planSummarySchema = z.object({
  id: planIdSchema,
  name: z.string(),
  notes: z.string(),
  tags: z.array(z.string()),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
  /** The stored plan passes the engine's plan schema (a plan saved mid-edit may not). */
  plan_valid: z.boolean(),
  result_summary: resultSummarySchema.nullable(),
});

export const planRecordSchema = planSummarySchema.extend({
  plan: planJsonSchema,
  /** The latest result saved with the plan (JSON: typed arrays read back as plain arrays), or null. */
  result: resultJsonSchema.nullable(),
});

/** A stored row that could not be read back (damaged by hand or by a bug): shown, never thrown. */
export const rowProblemSchema = z.object({ id: z.string(), message: z.string() });

export const planListSchema = z.object({
  /** Newest first (last saved). */
  plans: z.array(planSummarySchema),
  problems: z.array(rowProblemSchema),
});

export const undoTokenSchema = z.object({ id: planIdSchema, undo_token: z.uuid({ error: 'must be the undo token that delete returned' }) });

export const fileFilterSchema = z.object({
  name: z.string().min(1).max(80),
  extensions: z
    .array(z.string().regex(/^(\*|[A-Za-z0-9]{1,16})$/, 'must be an extension without its dot, such as json'))
    .min(1)
    .max(10),
});

/** What app.info() and the main process tell the user about the database (the renderer words each id). */
export const storageNoticeSchema = z.discriminatedUnion('id', [
  /** The database failed its integrity check or could not be opened: it was moved aside and a fresh one created. */
  z.object({ id: z.literal('database_recovered'), moved_to: z.string(), reason: z.string() }),
  /** The database was migrated to a newer schema; a copy of the old file was made first. */
  z.object({ id: z.literal('database_backed_up'), path: z.string(), from_version: z.number().int(), to_version: z.number().int() }),
  /** A stored row could not be read back (see plans.list's problems). */
  z.object({ id: z.literal('rows_damaged'), count: z.number().int().positive() }),
]);

/** The languages the interface speaks (renderer/src/i18n), and what the user chose: one of them or the system's. */
export const MENU_LOCALES = ['en', 'zh-CN'] as const;
export type MenuLocale = (typeof MENU_LOCALES)[number];
export const LOCALE_CHOICES = ['system', ...MENU_LOCALES] as const;
export type LocaleChoice = (typeof LOCALE_CHOICES)[number];

export const appInfoSchema = z.object({
  name: z.string(),
  version: z.string(),
  /** Electron's version; null under the test bridge. */
  electron_version: z.string().nullable(),
  platform: z.string(),
  /** Electron's userData folder: where plans.sqlite and its backups live. */
  data_dir: z.string(),
  database_path: z.string(),
  notices: z.array(storageNoticeSchema),
});

/** A file name the renderer suggests or names (an export, a report's image): no folder, nothing a file system refuses. */
export const fileNameSchema = z
  .string({ error: 'must be text' })
  .min(1, 'must not be empty')
  .max(200, 'must be at most 200 characters')
  .regex(/^[^/\\:*?"<>|\u0000-\u001f]+$/, 'must be a file name, without a folder')
  .refine((name) => name !== '.' && name !== '..', 'must be a file name, without a folder');

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** PNG bytes (the signature checked: a report's images are charts, nothing else is written beside it). */
export const pngBytesSchema = z
  .instanceof(ArrayBuffer, { error: 'must be the bytes of a PNG image' })
  .refine((bytes) => bytes.byteLength <= MAX_IMAGE_BYTES, `must be at most ${MAX_IMAGE_BYTES} bytes`)
  .refine((bytes) => bytes.byteLength > 8 && PNG_SIGNATURE.every((b, i) => new Uint8Array(bytes, 0, 8)[i] === b), 'must be a PNG image');

// Comparisons: 2 to 4 saved plans side by side, in the order chosen (the first is the one the others are measured against).
export const MIN_COMPARED_PLANS = 2;
export const MAX_COMPARED_PLANS = 4;

export const comparisonIdSchema = z.uuid({ error: 'must be a comparison id (a UUID)' });
export const comparisonUndoTokenSchema = z.object({ id: comparisonIdSchema, undo_token: z.uuid({ error: 'must be the undo token that delete returned' }) });

export const comparedPlanIdsSchema = z
  .array(planIdSchema, { error: 'must be a list of plan ids' })
  .min(MIN_COMPARED_PLANS, `must name at least ${MIN_COMPARED_PLANS} plans`)
  .max(MAX_COMPARED_PLANS, `must name at most ${MAX_COMPARED_PLANS} plans`)
  .refine((ids) => new Set(ids).size === ids.length, 'must not name a plan twice');

export const comparisonSummarySchema = z.object({
  id: comparisonIdSchema,
  name: z.string(),
  /** In column order. */
  plan_ids: z.array(planIdSchema),
  created_at: z.iso.datetime(),
  updated_at: z.iso.datetime(),
});

/**
 * One column of a saved comparison. `status`: `current` (the plan as it was compared), `edited` (saved again since,
 * or compared before memplan recorded versions: `plan` is its current version), `deleted` (deleted since: `plan`
 * is null), `damaged` (its row cannot be read).
 */
export const comparedPlanSchema = z.object({
  plan_id: planIdSchema,
  /** The plan's updated_at when the comparison was saved. */
  compared_updated_at: z.iso.datetime().nullable(),
  status: z.enum(['current', 'edited', 'deleted', 'damaged']),
  plan: planRecordSchema.nullable(),
});

export const comparisonRecordSchema = comparisonSummarySchema.extend({ plans: z.array(comparedPlanSchema) });

export const comparisonListSchema = z.object({
  /** Newest first (last saved). */
  comparisons: z.array(comparisonSummarySchema),
  problems: z.array(rowProblemSchema),
});

/** An attached snapshot is stored gzipped (a pickle compresses about 10:1): a 1 GB recording fits as ~100 MB. */
export const MAX_ATTACHED_SNAPSHOT_BYTES = 256 * 1024 * 1024;

export const snapshotIdSchema = z.uuid({ error: 'must be a snapshot id (a UUID)' });

/** An attached snapshot as the list shows it (without its bytes or its replay). */
export const snapshotSummarySchema = z.object({
  id: snapshotIdSchema,
  plan_id: planIdSchema,
  /** The file's name as opened. */
  name: z.string(),
  /** The file as opened (gzipped or not), and as stored (always gzipped). */
  size_bytes: z.number().int().nonnegative(),
  stored_bytes: z.number().int().nonnegative(),
  sha256: z.string(),
  /** The cap the replay ran under (set_per_process_memory_fraction: snapshots do not record it), or null. */
  memory_limit_bytes: z.number().int().positive().nullable(),
  events: z.number().int().nonnegative().nullable(),
  real_peak_allocated_bytes: z.number().int().nonnegative().nullable(),
  real_peak_reserved_bytes: z.number().int().nonnegative().nullable(),
  created_at: z.iso.datetime(),
});

export const snapshotRecordSchema = snapshotSummarySchema.extend({
  /** The stored file, gzipped (the engine's worker reads it as it reads the file). */
  bytes: z.instanceof(ArrayBuffer),
  /** Its replay result when it was attached (JSON, as results are stored), or null if the engine can no longer read it. */
  result: resultJsonSchema.nullable(),
});

const noArgs = z.strictObject({}).optional();

// ---------------------------------------------------------------------------------------------------------------
// Channels

export const contract = {
  /** Saved plans whose name, notes or tags contain every word of `query` (case-insensitive); newest first; not deleted. */
  'plans:list': {
    args: z.strictObject({ query: z.string({ error: 'must be text' }).max(MAX_QUERY_CHARS, `must be at most ${MAX_QUERY_CHARS} characters`).default('') }).default({ query: '' }),
    result: planListSchema,
  },
  /** One plan with its plan file and latest result; null if there is none with that id (or it is deleted). */
  'plans:get': { args: z.strictObject({ id: planIdSchema }), result: planRecordSchema.nullable() },
  /**
   * Inserts (no id) or updates (id) a plan. Every field is replaced: a save without `result` clears the stored
   * result (it belonged to the plan before the edit). `name` is also written into the plan file's `name`.
   */
  'plans:save': {
    args: z.strictObject({
      id: planIdSchema.optional(),
      name: planNameSchema,
      plan: planJsonSchema,
      result: resultJsonSchema.nullable().optional(),
      notes: notesSchema.default(''),
      tags: tagsSchema.default([]),
    }),
    result: planSummarySchema,
  },
  'plans:rename': { args: z.strictObject({ id: planIdSchema, name: planNameSchema }), result: planSummarySchema },
  /** A copy with a new id (and `name`, default "<name> (copy)"), its result included. */
  'plans:duplicate': { args: z.strictObject({ id: planIdSchema, name: planNameSchema.optional() }), result: planSummarySchema },
  /** Soft delete: the plan leaves the list; pass the answer to restore to undo. Deleted plans are purged after 30 days. */
  'plans:delete': { args: z.strictObject({ id: planIdSchema }), result: undoTokenSchema },
  'plans:restore': { args: z.strictObject(undoTokenSchema.shape), result: planSummarySchema },
  /** A native open dialog for a text file; null when the user cancels. `name` is the file's name, not its path. */
  'files:openText': {
    args: z.strictObject({ purpose: z.enum(['plan', 'hf_config'], { error: "must be 'plan' or 'hf_config'" }) }),
    result: z.object({ name: z.string(), text: z.string() }).nullable(),
  },
  /** A native open dialog for a binary file (a PyTorch memory snapshot, pickled, gzipped or not); null on cancel. */
  'files:openBytes': {
    args: z.strictObject({ purpose: z.enum(['snapshot'], { error: "must be 'snapshot'" }) }),
    result: z.object({ name: z.string(), bytes: z.instanceof(ArrayBuffer) }).nullable(),
  },
  /** A native save dialog, then writes `text` (UTF-8); null when the user cancels. */
  'files:saveText': {
    args: z.strictObject({
      suggested_name: z
        .string({ error: 'must be text' })
        .min(1, 'must not be empty')
        .max(200, 'must be at most 200 characters')
        .regex(/^[^/\\:*?"<>|\u0000-\u001f]+$/, 'must be a file name, without a folder'),
      text: z.string({ error: 'must be text' }).max(MAX_TEXT_FILE_BYTES, `must be at most ${MAX_TEXT_FILE_BYTES} characters`),
      filters: z.array(fileFilterSchema).max(10).default([]),
    }),
    result: z.object({ name: z.string() }).nullable(),
  },
  /** A native save dialog, then writes the PNG `bytes` (a chart); null when the user cancels. */
  'files:saveBytes': {
    args: z.strictObject({
      suggested_name: fileNameSchema,
      bytes: pngBytesSchema,
      filters: z.array(fileFilterSchema).max(10).default([]),
    }),
    result: z.object({ name: z.string() }).nullable(),
  },
  /**
   * A report: a native save dialog for the Markdown file, then writes `text` (UTF-8) there and each image beside
   * it, in the same folder, under its own name (the Markdown links them by those names); null on cancel. `images`
   * in the answer are the names written.
   */
  'files:saveReport': {
    args: z
      .strictObject({
        suggested_name: fileNameSchema,
        text: z.string({ error: 'must be text' }).max(MAX_TEXT_FILE_BYTES, `must be at most ${MAX_TEXT_FILE_BYTES} characters`),
        images: z
          .array(z.strictObject({ name: fileNameSchema.regex(/\.png$/i, 'must end in .png'), bytes: pngBytesSchema }))
          .max(MAX_REPORT_IMAGES, `must be at most ${MAX_REPORT_IMAGES} images`)
          .default([]),
      })
      .refine((args) => new Set(args.images.map((i) => i.name.toLowerCase())).size === args.images.length, { path: ['images'], message: 'must have different names' }),
    result: z.object({ name: z.string(), images: z.array(z.string()) }).nullable(),
  },
  /** Saved comparisons, newest first; deleted ones left out. */
  'comparisons:list': { args: noArgs, result: comparisonListSchema },
  /** One comparison with each of its plans as it is now (and whether it changed since); null if there is none. */
  'comparisons:get': { args: z.strictObject({ id: comparisonIdSchema }), result: comparisonRecordSchema.nullable() },
  /**
   * Inserts (no id) or replaces (id) a comparison: its name and its plans in column order, each recorded at its
   * current version. Every plan must be saved and not deleted.
   */
  'comparisons:save': {
    args: z.strictObject({ id: comparisonIdSchema.optional(), name: planNameSchema, plan_ids: comparedPlanIdsSchema }),
    result: comparisonSummarySchema,
  },
  /** Removes the comparison (its plans stay); the answer is what restore needs, for the undo period (30 days). */
  'comparisons:delete': { args: z.strictObject({ id: comparisonIdSchema }), result: comparisonUndoTokenSchema },
  /** Undoes the delete that answered `undo_token`. */
  'comparisons:restore': { args: z.strictObject(comparisonUndoTokenSchema.shape), result: comparisonSummarySchema },
  /**
   * Attaches a PyTorch memory snapshot to a saved plan: the file's `bytes` (stored gzipped, at most
   * MAX_ATTACHED_SNAPSHOT_BYTES so) and its replay `result` (kind `replay`). The same file attached to the same plan
   * again replaces the first (its result and cap updated).
   */
  'snapshots:attach': {
    args: z.strictObject({
      plan_id: planIdSchema,
      /** The file's name as opened (shown, never used as a path). */
      name: z.string({ error: 'must be text' }).trim().min(1, 'must not be empty').max(MAX_NAME_CHARS, `must be at most ${MAX_NAME_CHARS} characters`),
      bytes: z.instanceof(ArrayBuffer, { error: 'must be the bytes of the snapshot file' }).refine((b) => b.byteLength > 0, 'must not be empty'),
      result: resultJsonSchema,
      memory_limit_bytes: z.number().int().positive().nullable().default(null),
    }),
    result: snapshotSummarySchema,
  },
  /** The snapshots attached to a plan, newest first. */
  'snapshots:list': { args: z.strictObject({ plan_id: planIdSchema }), result: z.object({ snapshots: z.array(snapshotSummarySchema), problems: z.array(rowProblemSchema) }) },
  /** One attached snapshot with its bytes (gzipped) and stored result; null if there is none. */
  'snapshots:get': { args: z.strictObject({ id: snapshotIdSchema }), result: snapshotRecordSchema.nullable() },
  /** Removes the attachment (the plan stays). */
  'snapshots:detach': { args: z.strictObject({ id: snapshotIdSchema }), result: z.object({ id: snapshotIdSchema }) },
  'app:info': { args: noArgs, result: appInfoSchema },
  /** The interface's language (`locale`) and the user's choice (`choice`): the application menu is rebuilt in it. */
  'app:setLocale': { args: z.strictObject({ locale: z.enum(MENU_LOCALES), choice: z.enum(LOCALE_CHOICES) }), result: z.null() },
} as const satisfies Record<InvokeChannel, { args: z.ZodType; result: z.ZodType }>;

// ---------------------------------------------------------------------------------------------------------------
// Types derived from the contract

type Contract = typeof contract;
/** What the renderer passes (defaults not yet applied). */
export type ChannelArgs<C extends InvokeChannel> = z.input<Contract[C]['args']>;
/** What a handler receives: validated, defaults applied. */
export type ParsedArgs<C extends InvokeChannel> = z.output<Contract[C]['args']>;
export type ChannelResult<C extends InvokeChannel> = z.output<Contract[C]['result']>;
export type Handler<C extends InvokeChannel> = (args: ParsedArgs<C>) => Promise<ChannelResult<C>> | ChannelResult<C>;
export type Handlers = { [C in InvokeChannel]: Handler<C> };

type ChannelGroup = InvokeChannel extends `${infer G}:${string}` ? G : never;
type Verb<C extends InvokeChannel> = undefined extends ChannelArgs<C>
  ? (args?: ChannelArgs<C>) => Promise<ChannelResult<C>>
  : (args: ChannelArgs<C>) => Promise<ChannelResult<C>>;
type VerbsOf<G extends string> = { [C in InvokeChannel as C extends `${G}:${infer V}` ? V : never]: Verb<C> };

/** `window.memplan`: one verb per channel, grouped (`memplan.plans.save(...)`), plus the menu's commands. */
export type MemplanApi = { [G in ChannelGroup]: VerbsOf<G> } & {
  menu: {
    /** Calls `listener` with each command chosen in the application menu; returns a function that stops it. */
    onCommand(listener: (command: MenuCommand) => void): () => void;
  };
};

export type PlanSummary = z.output<typeof planSummarySchema>;
export type PlanRecord = z.output<typeof planRecordSchema>;
export type PlanList = z.output<typeof planListSchema>;
export type ResultSummary = z.output<typeof resultSummarySchema>;
export type ResultJson = z.output<typeof resultJsonSchema>;
export type RowProblem = z.output<typeof rowProblemSchema>;
export type UndoToken = z.output<typeof undoTokenSchema>;
export type ComparisonUndoToken = z.output<typeof comparisonUndoTokenSchema>;
export type StorageNotice = z.output<typeof storageNoticeSchema>;
export type AppInfo = z.output<typeof appInfoSchema>;
export type FileFilter = z.output<typeof fileFilterSchema>;
export type ComparisonSummary = z.output<typeof comparisonSummarySchema>;
export type ComparisonRecord = z.output<typeof comparisonRecordSchema>;
export type ComparedPlan = z.output<typeof comparedPlanSchema>;
export type ComparisonList = z.output<typeof comparisonListSchema>;
export type SnapshotSummary = z.output<typeof snapshotSummarySchema>;
export type SnapshotRecord = z.output<typeof snapshotRecordSchema>;

// ---------------------------------------------------------------------------------------------------------------
// Messages

/** `name: must not be empty; tags[2]: must be text`: every problem, each with its field. */
export function describeIssues(error: z.ZodError, prefix: readonly PropertyKey[] = []): string {
  return error.issues
    .map((issue) => {
      const path = [...prefix, ...issue.path].map((key, i) => (typeof key === 'number' ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`)).join('');
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join('; ');
}
