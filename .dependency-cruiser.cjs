/**
 * Layering of memplan, checked in `npm test` (`npm run lint:layers`).
 * Data flows one way: plan -> engine -> result -> CLI / app. The engine never calls out.
 * engine/ is pure TypeScript: it runs in a Web Worker, under Node and in the CLI.
 */
/** Packages the engine may use: pure JavaScript that runs in a browser, a worker and Node. */
const ENGINE_PACKAGES = ['zod', 'fflate'];

module.exports = {
  forbidden: [
    ...require('./electron/layers.cjs'),
    {
      name: 'engine-no-node-builtins',
      comment: 'engine/ runs in a Web Worker: no Node built-ins (node:fs, path, ...).',
      severity: 'error',
      from: { path: '^engine/' },
      to: { dependencyTypes: ['core'] },
    },
    {
      name: 'engine-only-engine',
      comment: 'engine/ imports nothing outside engine/ (the edges call in, the engine never calls out).',
      severity: 'error',
      from: { path: '^engine/' },
      to: { path: '^(cli|electron|renderer|test|bench|resources|build)/' },
    },
    {
      name: 'engine-allowed-packages',
      comment: `engine/ may use only these packages: ${ENGINE_PACKAGES.join(', ')}.`,
      severity: 'error',
      from: { path: '^engine/' },
      to: {
        dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'],
        pathNot: `^node_modules/(${ENGINE_PACKAGES.join('|')})/`,
      },
    },
    {
      name: 'no-unresolvable',
      comment: 'Every import resolves.',
      severity: 'error',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'no-circular',
      comment:
        'No import cycles (a cycle through type-only imports is harmless: nothing runs). A recursive Svelte component imports itself (Svelte 5 replaced <svelte:self> with that).',
      severity: 'error',
      from: { pathNot: '^renderer/src/components/LayerRow\\.svelte$' },
      to: { circular: true, viaOnly: { dependencyTypesNot: ['type-only'] } },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      extensions: ['.ts', '.js', '.json', '.svelte'],
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
