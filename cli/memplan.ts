#!/usr/bin/env node
/**
 * The `memplan` command's entry: turns on Node's compile cache, then runs the command (cli/main.ts).
 *
 * Note [Compile cache]
 * ~~~~~~~~~~~~~~~~~~~~
 * A `memplan` process spends most of its start-up compiling: stripping the TypeScript of ~90 modules (run as
 * `node cli/memplan.ts`) and compiling them for V8, about 110 ms of a 200 ms `memplan presets` on a 2-core
 * machine. `module.enableCompileCache()` keeps both in the OS's temporary folder (node-compile-cache), keyed by
 * each file's contents, so every later process reads them back: `memplan presets` takes about 120 ms from then on.
 * Only modules loaded after the call are cached, hence this file and the dynamic import. Node older than 22.1 has
 * no compile cache and runs as before; NODE_DISABLE_COMPILE_CACHE=1 turns it off. The built command
 * (`npm run build`: rolldown.config.ts) is this file and a few bundles, no TypeScript to strip and no module graph
 * to resolve: `memplan presets` takes about 50 ms there (20 ms of it Node's own start).
 */
import * as nodeModule from 'node:module';

nodeModule.enableCompileCache?.();
await import('./main.ts');
