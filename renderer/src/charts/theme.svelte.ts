/**
 * Chart colours from the CSS variables of palette.css, resolved to rgb() for the canvas. A probe element inherits
 * the chart's `color-scheme`, so light-dark() resolves as the page would; the palette is read again when the system
 * theme changes or the app switches it (an attribute of <html> changes).
 */
import './palette.css';

import { CATEGORIES, PHASES, type Category } from './categories.ts';

export interface Palette {
  text: string;
  muted: string;
  grid: string;
  axis: string;
  surface: string;
  allocated: string;
  reserved: string;
  capacity: string;
  recommended: string;
  ok: string;
  bad: string;
  font: string;
  phase: Record<string, string>;
  category: Record<Category, string>;
  series: string[];
}

function resolve(probe: HTMLElement, name: string): string {
  probe.style.color = `var(${name})`;
  return getComputedStyle(probe).color;
}

/** Reads the palette as seen from `el` (its color-scheme and font). */
export function readPalette(el: Element): Palette {
  const probe = document.createElement('span');
  probe.style.display = 'none';
  el.appendChild(probe);
  try {
    const r = (name: string) => resolve(probe, name);
    return {
      text: r('--mp-chart-text'),
      muted: r('--mp-fg-muted'),
      grid: r('--mp-chart-grid'),
      axis: r('--mp-chart-axis'),
      surface: r('--mp-surface'),
      allocated: r('--mp-allocated'),
      reserved: r('--mp-reserved'),
      capacity: r('--mp-capacity'),
      recommended: r('--mp-recommended'),
      ok: r('--mp-ok'),
      bad: r('--mp-bad'),
      font: getComputedStyle(el).fontFamily,
      phase: Object.fromEntries(PHASES.map((p) => [p, r(`--mp-phase-${p}`)])),
      category: Object.fromEntries(CATEGORIES.map((c) => [c, r(`--mp-cat-${c}`)])) as Record<Category, string>,
      series: [1, 2, 3, 4].map((i) => r(`--mp-series-${i}`)),
    };
  } finally {
    probe.remove();
  }
}

/** "rgb(47, 111, 223)" with an alpha: "rgba(47, 111, 223, 0.2)". */
export function alpha(color: string, a: number): string {
  const m = color.match(/[\d.]+/g);
  if (!m || m.length < 3) return color;
  return `rgba(${m[0]}, ${m[1]}, ${m[2]}, ${a})`;
}

/** Calls `onChange` whenever the theme may have changed; returns the function that stops listening. */
export function watchTheme(onChange: () => void): () => void {
  const media = matchMedia('(prefers-color-scheme: dark)');
  media.addEventListener('change', onChange);
  const observer = new MutationObserver(onChange);
  observer.observe(document.documentElement, { attributes: true, attributeFilter: ['class', 'style', 'data-theme'] });
  return () => {
    media.removeEventListener('change', onChange);
    observer.disconnect();
  };
}

/** The palette as reactive state for a chart living in `el`: `palette.current` changes with the theme. */
export class ThemePalette {
  current = $state.raw<Palette | null>(null);

  /** Starts reading from `el` (call from an attachment; returns the cleanup). */
  attach(el: Element): () => void {
    this.current = readPalette(el);
    return watchTheme(() => {
      // the attribute has changed, the styles may not be recomputed until the next frame
      requestAnimationFrame(() => (this.current = readPalette(el)));
    });
  }
}
