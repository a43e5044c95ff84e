/**
 * The app's layering rules for dependency-cruiser (`npm run lint:layers`): spread them into the `forbidden` list
 * of .dependency-cruiser.cjs (`...require('./electron/layers.cjs')`) and add `electron` to the folders cruised.
 */
module.exports = [
  {
    name: 'electron-common-pure',
    comment: 'electron/common/ (the IPC contract) is loaded by the main process, the test bridge and (types) the renderer: no Electron, nothing of main, preload or renderer.',
    severity: 'error',
    from: { path: '^electron/common/' },
    to: { path: '^(electron/(main|preload)|renderer)/|^node_modules/electron/' },
  },
  {
    name: 'electron-common-no-node',
    comment: 'electron/common/ uses no Node built-ins (the renderer reads its types).',
    severity: 'error',
    from: { path: '^electron/common/' },
    to: { dependencyTypes: ['core'] },
  },
  {
    name: 'preload-channels-only',
    comment: 'The sandboxed preload is one CommonJS file that cannot require packages: electron and the channel names only (types aside).',
    severity: 'error',
    from: { path: '^electron/preload/' },
    to: { dependencyTypesNot: ['type-only'], pathNot: '^(electron/common/channels\\.ts|node_modules/electron/)' },
  },
  {
    name: 'main-logic-without-electron',
    comment: 'Storage, handlers, security, the menu template and the window state are tested under plain Node: no Electron import (types aside).',
    severity: 'error',
    from: { path: '^electron/main/(storage|handlers|security)/|^electron/main/(menu-template|window-state)\\.ts$' },
    to: { path: '^node_modules/electron/', dependencyTypesNot: ['type-only'] },
  },
  {
    name: 'renderer-not-main',
    comment: 'The renderer reaches the main process through window.memplan only (types from electron/common).',
    severity: 'error',
    from: { path: '^renderer/' },
    to: { path: '^electron/(main|preload)/' },
  },
];
