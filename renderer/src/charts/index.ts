/**
 * memplan's charts, for the result views and the comparison view: thin Svelte wrappers around Chart.js 4 (zoom and
 * annotation plugins) whose colours come from palette.css, and the byte units their axes use.
 */
export { default as TimelineChart, type TimelineSeries, type XRange } from './TimelineChart.svelte';
export { default as BatchCurveChart, type BatchCurve } from './BatchCurveChart.svelte';
export { default as BreakdownBar, type BarSegment } from './BreakdownBar.svelte';
export { layoutTimeline, type TimelineAxis, type TimelineLayout } from './timeline-data.ts';
export { nonMonotonicRange } from './batch-curve.ts';
export { CATEGORIES, PHASES, type Category } from './categories.ts';
export { byteTicks, formatByteTick, formatBytes, formatCount, formatPercent } from './units.ts';
export type { AnyChart } from './chartjs.svelte.ts';
