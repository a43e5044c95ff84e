/**
 * The result schemas: one definition of every object the engine returns, the worker posts, the main process
 * stores in SQLite and `memplan --json` prints. snake_case field names throughout (as in the plan file); the
 * TypeScript types are inferred from the schemas.
 */
export { RESULT_SCHEMA_VERSION } from './version.ts';
export { PHASES, issueSchema, liveTensorSchema, memoryCategorySchema, oomSchema, type Issue, type LiveTensor, type Oom } from './common.ts';
export { DEFAULT_TIMELINE_POINTS, decimateTimeline, emptyTimeline, timelineSchema, TimelineRecorder, type RawTimeline, type Timeline } from './timeline.ts';
export { resultJsonReplacer, stringifyResult } from './json.ts';
export {
  ADVICE_IDS,
  ADVICE_PARAMS,
  NOT_APPLICABLE_REASONS,
  NOTE_IDS,
  NOTE_PARAMS,
  adviceItemSchema,
  adviceNotComputedSchema,
  adviceResultSchema,
  notApplicableSchema,
  noteSchema,
  type AdviceId,
  type AdviceItem,
  type AdviceNotComputed,
  type AdviceOf,
  type AdviceResult,
  type NotApplicable,
  type NotApplicableReason,
  type Note,
  type NoteId,
  type NoteOf,
} from './advice.ts';
export {
  breakdownSchema,
  gpuUsedSchema,
  modelSummarySchema,
  partlyTrainable,
  simulateResultSchema,
  stepResultSchema,
  type Breakdown,
  type GpuUsed,
  type SimulateResult,
  type StepResult,
} from './simulate.ts';
export {
  RECOMMENDATION_REASONS,
  maxBatchResultSchema,
  recommendationSchema,
  neededSchema,
  trialSchema,
  unstableRegionSchema,
  type MaxBatchResult,
  type Needed,
  type Recommendation,
  type RecommendationReason,
  type Trial,
  type UnstableRegion,
} from './max-batch.ts';
export { CALIBRATED_GPU, CONFIDENCE_LEVELS, caveatSchema, caveatsFor, caveatsSchema, type Caveat, type CaveatDevice, type CaveatId, type Caveats, type Confidence, type ModelBuild } from './caveats.ts';
export { replayResultSchema, whatIfSchema, peakSegmentsSchema, segmentSchema, type ReplayResult, type WhatIf, type PeakSegments, type SegmentInfo } from './replay.ts';
export { gpuListSchema, presetListSchema, type GpuList, type PresetList } from './lists.ts';
