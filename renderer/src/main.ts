/** The renderer's entry: the design system's styles, then the one window. */
import { mount } from 'svelte';
import './styles/app.css';
import App from './App.svelte';

const target = document.getElementById('app');
if (!target) throw new Error('index.html has no #app element');
export default mount(App, { target });
