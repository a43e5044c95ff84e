/** The result views the shell mounts (see each component's header for its props). */
export { default as SimulateView } from './SimulateView.svelte';
export { default as MaxBatchView } from './MaxBatchView.svelte';
export { default as AdviceList } from './AdviceList.svelte';
export { default as LargestTensors } from './LargestTensors.svelte';
export { adviceWords, categoryName, noteText, phaseName } from './words.ts';
