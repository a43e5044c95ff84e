/**
 * The allocator settings the snapshot view replays a run under: `memplan replay`'s defaults (engine
 * DEFAULT_WHAT_IFS), and garbage collection with max_split_size_mb (garbage_collection_threshold acts only under
 * a memory cap, as CUDACachingAllocator's garbage_collect_cached_blocks does).
 */
import { DEFAULT_WHAT_IFS } from '../../../engine/index.ts';

export const SNAPSHOT_WHAT_IFS: readonly string[] = [...DEFAULT_WHAT_IFS, 'garbage_collection_threshold:0.6,max_split_size_mb:128'];
