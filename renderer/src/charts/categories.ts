/** The names every memory chart and table shares (the engine's, engine/result/common.ts), in drawing order. */
import type { Breakdown } from '../../../engine/result/index.ts';

/** What fills memory at a peak, in the order the breakdown bar stacks it (cached_free last: it holds no tensor). */
export const CATEGORIES = ['parameter', 'gradient', 'optimizer_state', 'activation', 'temporary', 'workspace', 'input', 'cached_free'] as const satisfies readonly (keyof Breakdown)[];
export type Category = (typeof CATEGORIES)[number];

export { PHASES } from '../../../engine/result/index.ts';
