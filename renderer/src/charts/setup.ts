/**
 * Chart.js, tree-shaken: only the controllers, elements, scales and plugins memplan's charts use are registered
 * (once, on first import). Colours are always set by the charts themselves (theme.svelte.ts), so no `Colors`.
 */
import { Chart, Filler, LinearScale, LineController, LineElement, PointElement, ScatterController, Tooltip } from 'chart.js';
import annotationPlugin from 'chartjs-plugin-annotation';
import zoomPlugin from 'chartjs-plugin-zoom';

Chart.register(LineController, ScatterController, LineElement, PointElement, LinearScale, Filler, Tooltip, annotationPlugin, zoomPlugin);
Chart.defaults.animation = false;
Chart.defaults.maintainAspectRatio = false;
Chart.defaults.responsive = true;

export { Chart };
