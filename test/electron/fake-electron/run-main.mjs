/**
 * Loads the built main process (out/main/index.js) under Node with `electron` resolved to electron.mjs beside
 * this file, drives what Electron would (app ready, the window's ready-to-show, a new web contents, IPC calls, a
 * protocol request, a menu click) and prints what happened as one JSON line. Used by main-wiring.test.ts.
 * Usage: node run-main.mjs <out/main/index.js> <userData folder>
 */
import { registerHooks } from 'node:module';
import { pathToFileURL } from 'node:url';

const [mainPath, userData] = process.argv.slice(2);
const fake = new URL('./electron.mjs', import.meta.url).href;
registerHooks({
  resolve: (specifier, context, nextResolve) => (specifier === 'electron' ? { url: fake, shortCircuit: true } : nextResolve(specifier, context)),
});
process.env.MEMPLAN_USER_DATA_DIR = userData;

await import(pathToFileURL(mainPath).href);
await new Promise((resolve) => setTimeout(resolve, 100)); // app.whenReady().then(...)
const state = globalThis.fakeElectron;
const window = state.windows[0];
window.emit('ready-to-show');

// What a new web contents may do.
const contents = { listeners: {}, openHandler: null, on(event, listener) { this.listeners[event] = listener; }, setWindowOpenHandler(handler) { this.openHandler = handler; } };
for (const listener of state.appListeners['web-contents-created'] ?? []) listener({}, contents);
const prevented = {};
for (const event of ['will-navigate', 'will-redirect', 'will-attach-webview']) {
  let was = false;
  contents.listeners[event]?.({ preventDefault: () => (was = true) });
  prevented[event] = was;
}
const openHttps = contents.openHandler({ url: 'https://pytorch.org/' });
const openFile = contents.openHandler({ url: 'file:///etc/passwd' });

// IPC, as the page (top frame of app://memplan), a subframe and another page would call it.
const top = { senderFrame: { url: 'app://memplan/index.html', parent: null } };
const plan = { format: 'memplan.plan', version: 1, model: { preset: 'gpt2' }, training: { batch_size: 4 } };
const saved = await state.ipcHandlers['plans:save'](top, { name: 'wired', plan });
const listed = await state.ipcHandlers['plans:list'](top, undefined);
const fromSubframe = await state.ipcHandlers['plans:list']({ senderFrame: { url: 'app://memplan/index.html', parent: {} } }, {});
const fromElsewhere = await state.ipcHandlers['plans:list']({ senderFrame: { url: 'https://evil.example/', parent: null } }, {});
const noFrame = await state.ipcHandlers['plans:list']({ senderFrame: null }, {});
const info = await state.ipcHandlers['app:info'](top, undefined);
const cancelledOpen = await state.ipcHandlers['files:openText'](top, { purpose: 'plan' });

// The renderer's files.
const page = await state.protocolHandlers.app({ url: 'app://memplan/', method: 'GET' });
const escapes = [];
for (const path of ['/%2e%2e/main/index.js', '/..%2fmain%2findex.js', '/assets/..%2f..%2f..%2fpackage.json']) {
  const response = await state.protocolHandlers.app({ url: `app://memplan${path}`, method: 'GET' });
  escapes.push({ path, status: response.status, body: (await response.text()).slice(0, 40) });
}
const otherHost = await state.protocolHandlers.app({ url: 'app://elsewhere/index.html', method: 'GET' });

// A menu click.
const file = state.menu.template.find((m) => m.label === '&File');
file.submenu.find((i) => i.id === 'save').click();

window.emit('close');

console.log(
  JSON.stringify({
    schemes: state.schemes,
    channels: Object.keys(state.ipcHandlers).sort(),
    window: { options: window.options, url: window.url, shown: window.shown },
    prevented,
    openHttps,
    openFile,
    openedExternal: state.openedExternal,
    permission: { camera: await new Promise((r) => state.permissionRequest(null, 'media', r)), check: state.permissionCheck(null, 'geolocation') },
    saved,
    listed,
    fromSubframe,
    fromElsewhere,
    noFrame,
    info,
    cancelledOpen,
    page: { status: page.status, csp: page.headers.get('content-security-policy'), type: page.headers.get('content-type'), body: (await page.text()).slice(0, 15) },
    escapes,
    otherHost: otherHost.status,
    sent: state.sent,
    errorBoxes: state.errorBoxes,
    messageBoxes: state.messageBoxes,
  }),
);
process.exit(0);
