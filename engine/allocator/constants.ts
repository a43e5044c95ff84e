/**
 * Constants of PyTorch's CUDA caching allocator (`c10/cuda/CUDACachingAllocator.cpp` and
 * `c10/core/AllocatorConfig.h`, PyTorch 2.11). Sizes in bytes.
 */
export const kMinBlockSize = 512; // every size rounds up to at least this, and to a multiple of it
export const kSmallSize = 1_048_576; // requests of at most 1 MiB go to the small pool
export const kSmallBuffer = 2_097_152; // a small-pool segment (and expandable page of the small pool) is 2 MiB
export const kMinLargeAlloc = 10_485_760; // requests from 1 MiB to 10 MiB get a large_segment_size segment (20 MiB unless set); it must exceed this
export const kRoundLarge = 2_097_152; // segments of larger requests round up to 2 MiB
export const kLargeBuffer = 20_971_520; // default large_segment_size: 20 MiB segments, and expandable pages of the large pool
export const kRoundUpPowerOfTwoIntervals = 16; // intervals of roundup_power2_divisions: [<2 MiB, 2-4 MiB, ..., >=32 GiB)
/** `max_split_size` default: SIZE_MAX, i.e. no oversize handling. */
export const kNoMaxSplitSize = Number.POSITIVE_INFINITY;
/** `torch.cuda.OutOfMemoryError` for a single request of 1 EiB or more (NativeCachingAllocator::allocate). */
export const kMaxRequestBytes = 2 ** 60;
