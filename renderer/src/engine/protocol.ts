/** The worker protocol and result types as the renderer uses them: engine/worker/protocol.ts and engine/result/. */
export type { EngineAnswer, EngineRequest, AnswerOf, Issue as PlanIssue, SimulateResult, MaxBatchResult, Trial, AdviceItem, AdviceResult, NotApplicable } from '../../../engine/index.ts';
