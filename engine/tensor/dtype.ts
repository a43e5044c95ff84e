/** PyTorch dtypes and their element sizes (`c10/core/ScalarType.h`). */
export const DTYPE_BYTES = {
  float64: 8,
  float32: 4,
  float16: 2,
  bfloat16: 2,
  float8_e4m3fn: 1,
  float8_e5m2: 1,
  int64: 8,
  int32: 4,
  int8: 1,
  uint8: 1,
  bool: 1,
} as const;

export type DType = keyof typeof DTYPE_BYTES;

/** Accumulation dtype of reductions and norm statistics (`at::acc_type` on CUDA): fp32 for half types. */
export function accType(dtype: DType): DType {
  return dtype === 'float16' || dtype === 'bfloat16' ? 'float32' : dtype;
}
