/**
 * The few globals the engine uses that every runtime it runs in has (browsers, Web Workers, Node >= 11) but
 * that lib "ES2023" does not declare. Only the engine's own type-check sees this file (the root tsconfig gets
 * them from @types/node), so a Node or DOM API used in engine/ still fails `npm run typecheck`.
 */
declare class TextDecoder {
  constructor(label?: string, options?: { fatal?: boolean });
  decode(input?: Uint8Array): string;
}

/** The worker host yields to the event loop with it between trials, so a `cancel` message is seen. */
declare function setTimeout(handler: () => void, timeout?: number): unknown;

/** A search on a pool of workers times its second trial to decide whether they pay (search/max-batch.ts). */
declare const performance: { now(): number };
