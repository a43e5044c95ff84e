/**
 * The temporary storage of the CUB algorithms PyTorch runs on CUDA (CCCL 3.0, as CUDA 13.0 ships it, on sm90). Each
 * is asked for through the caching allocator (`CUB_WRAPPER` in ATen/cuda/cub.cuh: the size query, then
 * `CUDACachingAllocator::get()->allocate(temp_storage_bytes)`), so each is a block of its own, freed when the
 * kernel is queued.
 */
import { DTYPE_BYTES } from '../tensor/dtype.ts';
import type { Runtime } from './runtime.ts';

/**
 * Items per tile of the single-pass CUB algorithms memplan simulates:
 * - `DeviceScan` over int64 with PyTorch's own `SumOp` (`at::cuda::cub::exclusive_sum`) or with `std::plus`
 *   (`at::cuda::cub::inclusive_scan`, cumsum of one row), which no sm90 tuning matches (its tunings name
 *   `cuda::std::plus<>`): the default policy, 128 threads x 15 items scaled for 8-byte items to 7
 *   (`MemBoundScaling`), for 4-byte items 15;
 * - `DeviceSelect::UniqueByKey` of int64 keys with int64 values, the sm90 tuning's 640 threads x 7 items.
 */
export const kScanTileItems = 896;
const kScanTileItems4B = 128 * 15;
export const kUniqueByKeyTileItems = 4480;

/** Bytes of the int64 keys and values a radix sort works on. */
const kIndexBytes = DTYPE_BYTES.int64;

const roundUp = (n: number, m: number) => Math.ceil(n / m) * m;

/**
 * CUB's temporary storage for a single-pass algorithm over `items` items: the tile states (a descriptor per tile,
 * twice the item's size for a primitive one, plus 32 of padding), laid out by `AliasTemporaries` (each piece
 * rounded up to 256 B, plus 255 B of slack) inside the tile state and once more by the dispatch. Measured on the
 * H100: the embedding backward's int64 scan 1,279 B up to 14,336 items (N = 4096 and 16,384 over an 8,192-row
 * table), 1,535 B at 26,624 and 27,648 items (Phi-3 mini at batch 26 and 27:
 * phi3_mini_bf16_ckpt_adamw_s1024_b27_cap40g); unique_by_key's 1,279 B at 27,648 keys; Mixtral's int32 cumsum of 8
 * expert counts 1,023 B; the packed-sequence check's int64 cumsum of one sequence of 1,024 tokens 1,279 B
 * (qwen3_4l_cls_nopad_b1_amp_bf16_ckpt).
 */
export function cubTileStateTempBytes(items: number, tileItems: number, descriptorBytes = 16): number {
  return roundUp(descriptorBytes * (32 + Math.ceil(items / tileItems)), 256) + 511;
}

/**
 * CUB's storage for `at::cuda::cub::inclusive_scan` with `std::plus` over `items` items. `itemBytes`: 4 or 8
 * (int32, int64).
 */
export function inclusiveScanTempBytes(items: number, itemBytes: 4 | 8): number {
  return cubTileStateTempBytes(items, itemBytes === 8 ? kScanTileItems : kScanTileItems4B, 2 * itemBytes);
}

/**
 * The scratch of `torch.cumsum(x, dim)` (the output is the caller's): where the scanned dimension is all of x (one
 * row), `scan_dim` in ScanUtils.cuh calls CUB's `inclusive_scan`, whose storage is asked for and freed at once;
 * other shapes run PyTorch's own scan kernels, which ask for nothing.
 */
export function cumsumScratch(rt: Runtime, shape: readonly number[], dim: number, dtype: 'int32' | 'int64', label: string): void {
  const items = shape.reduce((n, d) => n * d, 1);
  if (items !== shape.at(dim)) return;
  rt.cuda.release(rt.cuda.empty([inclusiveScanTempBytes(items, DTYPE_BYTES[dtype] as 4 | 8)], 'uint8', `${label}: CUB scan`, 'workspace'));
}

/**
 * CUB's onesweep radix sort of N int64 key/value pairs over all 64 key bits (`radix_sort_pairs` passes no bit
 * count) on sm90 (`dispatch_radix_sort.cuh`, Policy900: tile 384 threads x 12 items, 8 passes of 8 bits):
 * bins, look-back, its own key and value buffers (it may not overwrite its inputs), counters; each rounded to
 * 256 B, plus 255 B of alignment slack. `keyBits`: a sort over fewer bits (index_put's, `get_num_bits` of the
 * largest index) makes one pass per 8 of them (measured: 71,167 B for 4,096 pairs over 12 or 13 bits,
 * test/fixtures/calibration/mixtral_4l_*).
 */
export function radixSortTempBytes(n: number, keyBits = 64): number {
  const passes = Math.ceil(keyBits / 8);
  const radixDigits = 256;
  const tile = 384 * 12;
  const bins = passes * radixDigits * 8;
  const lookback = Math.ceil(n / tile) * radixDigits * 4;
  const keys = n * kIndexBytes;
  const values = n * kIndexBytes;
  const counters = passes * 4;
  return [bins, lookback, keys, values, counters].reduce((s, b) => s + roundUp(b, 256), 0) + 255;
}
