/**
 * The engine's one entry point for the edges: the CLI, the app's worker host and main process, tests and benches.
 * They import nothing deeper. Everything a function here returns is plain, structured-cloneable data described by
 * the result schemas (engine/result/), snake_case throughout.
 */

// The plan file: schema, parsing with every problem as a value.
export { planSchema, layerSchema, modelSchema, trainingSchema, gpuSchema, TORCHVISION_MODELS, type Plan, type PlanInput, type ModelSpec, type TrainingSpec, type LayerSpec } from './plan/schema.ts';
export { safeParsePlan, parsePlan, parsePlanText, safeParseJson, safeParseHfConfig, type PlanParse, type ParsePlanOptions } from './plan/parse.ts';
export { formatIssues } from './plan/issues.ts';
export { InputError, InputIssuesError, plainError } from './errors.ts';

// GPUs: the catalog (data the edges read) and which GPU a plan runs on.
export { parseGpuCatalog, findGpu, memoryAvailableToPyTorch, outsideAllocatorBytes, gpuCatalogSchema, gpuSpecSchema, type GpuCatalog, type GpuSpec, type Evidence } from './gpu/catalog.ts';
export { DEFAULT_GPU, deviceFor, planGpu, capBytes, planNeedsConvTable, type Device, type DeviceSpec } from './gpu/device.ts';

// Simulating, searching, advising, replaying.
export { UNBOUNDED_MEMORY_BYTES, simulate, type SimulateOptions } from './train/simulate.ts';
export { searchMaxBatch, findMaxBatch, fitsBySearch, likelyTrials, nextTrial, searchOnPool, simulateTrial, kWorthWorkersMs, DEFAULT_SAFETY_MARGIN, type MaxBatchOptions, type PoolSearchOptions, type PoolSearchStats, type TrialOutcome, type TrialPool } from './search/max-batch.ts';
export { adviseSteps, advise, adviseVariant, planVariants, rankAdvice, setUpAdvice, type AdviceEvent, type AdviceOptions, type AdviceSetup, type Variant, type VariantOptions } from './search/advice.ts';
export { readSnapshotBytes, parseSnapshot, type MemorySnapshot } from './snapshot/snapshot.ts';
export { replay, replaySteps, DEFAULT_WHAT_IFS, type ReplayRequest } from './snapshot/replay-result.ts';
export { maybeGunzip } from './snapshot/gzip.ts';
export * from './compare/index.ts';

// Models the plan can name.
export { PRESETS, PRESET_NAMES, type Preset } from './models/presets.ts';
export { HF_MODEL_TYPES, WITHOUT_TOKEN_CLASSIFIER, resolveHfConfig, type ProblemType, type SequenceClassifierHead, type TokenClassifierHead } from './models/hf/config.ts';
export { ALL_LINEAR, LORA_MODEL_TYPES, isAllLinear, loraConfigCode, peftDefaultTargets, type TargetModules } from './models/peft/lora.ts';

// Bytes and PyTorch's own text.
export { formatSize } from './allocator/format.ts';

// Results: schemas, types, JSON.
export * from './result/index.ts';

// The worker protocol and its host.
export * from './worker/protocol.ts';
export { createEngineHost, type EngineHost, type EngineHostOptions } from './worker/host.ts';
