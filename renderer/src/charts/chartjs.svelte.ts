/**
 * The one bridge between Svelte and Chart.js, as an attachment (`<canvas {@attach chartjs(...)}>`): the chart is
 * created once, untracked (Chart.js must never see Svelte's state proxies), then `update` runs in an effect, so
 * it re-runs when the state it reads changes (new data, locale, theme) and updates the same chart in place.
 * Destroyed when the canvas leaves the page.
 */
import { untrack } from 'svelte';
import type { Attachment } from 'svelte/attachments';
import { Chart } from './setup.ts';
import { ThemePalette, type Palette } from './theme.svelte.ts';

export type AnyChart = Chart<'line' | 'scatter', { x: number; y: number }[]>;

export interface ChartBinding {
  /** Builds the chart's configuration; called once. */
  create(canvas: HTMLCanvasElement, palette: Palette): AnyChart;
  /** Brings the chart up to date (data, options, colours) and calls chart.update(); re-run when what it reads changes. */
  update(chart: AnyChart, palette: Palette): void;
  /** The chart exists (for zoom buttons, exports); null when it is gone. */
  ready?(chart: AnyChart | null): void;
}

export function chartjs(binding: ChartBinding): Attachment<HTMLCanvasElement> {
  return (canvas) => {
    const theme = new ThemePalette();
    const stopTheme = theme.attach(canvas);
    const chart = untrack(() => binding.create(canvas, theme.current!));
    $effect(() => {
      const palette = theme.current!;
      binding.update(chart, palette);
    });
    untrack(() => binding.ready?.(chart));
    return () => {
      stopTheme();
      binding.ready?.(null);
      chart.destroy();
    };
  };
}
