/**
 * The global-memory workspace of PyTorch's CUDA reductions (`aten/src/ATen/native/cuda/Reduce.cuh`).
 * `setReduceConfig` picks a launch configuration; when it splits one output's inputs across several thread
 * blocks (`should_global_reduce`), `gpu_reduce_kernel` allocates a staging buffer (`global_memory_size`) and
 * semaphores (`semaphore_size`) through the caching allocator for the duration of the kernel. At large batch
 * sizes a bias gradient's `sum` takes a buffer of ~100 MB this way (measured on the H100: 102,400,000 + 32 B for
 * the sum of a [12800, 1000] fp16 gradient over its rows, as this computes).
 */

export interface ReductionDevice {
  multiProcessorCount: number;
  maxThreadsPerMultiProcessor: number;
}

export interface ReductionShape {
  /** Elements of the result. */
  numOutputs: number;
  /** Elements summed into each result. */
  inputsPerOutput: number;
  /** Is the reduced dimension the input's contiguous (fastest) one? (row sums: yes; column sums: no) */
  reduceFastest: boolean;
  /** Bytes of an input element, and of the accumulation type (`arg_t`, fp32 for half types). */
  elementBytes: number;
  accumulateBytes: number;
}

const kWarpSize = 32;
const kMaxReduceThreads = 512; // max_reduce_threads: 512 unless complex double
const kInputVecSize = 4; // vt0
const kMinValuesPerThread = 16;
const kMaxValuesPerThread = 256;

const divUp = (a: number, b: number) => Math.floor((a + b - 1) / b);
const lastPow2 = (n: number) => 2 ** Math.floor(Math.log2(Math.max(1, n)));

/** Bytes of [buffer, semaphores] the reduction allocates; [0, 0] when it reduces within thread blocks only. */
export function reductionWorkspace(shape: ReductionShape, device: ReductionDevice): [number, number] {
  const { numOutputs, inputsPerOutput, reduceFastest } = shape;
  if (numOutputs === 0 || inputsPerOutput <= 1) return [0, 0];
  let dim0 = reduceFastest ? inputsPerOutput : numOutputs;
  const dim1 = reduceFastest ? numOutputs : inputsPerOutput;
  let outputVecSize = 1;
  if (reduceFastest) {
    if (dim0 > 128) dim0 = Math.floor(dim0 / kInputVecSize); // vectorize along input
  } else {
    // get_output_vec_size: 4, halved until it divides the output extent (allocations are 512-byte aligned)
    outputVecSize = 4;
    while (outputVecSize > 1 && numOutputs % outputVecSize !== 0) outputVecSize /= 2;
    dim0 = Math.floor(dim0 / outputVecSize);
  }
  // set_block_dimension
  const maxNumThreads = kMaxReduceThreads / outputVecSize;
  const dim0Pow2 = dim0 < maxNumThreads ? lastPow2(dim0) : maxNumThreads;
  const dim1Pow2 = dim1 < maxNumThreads ? lastPow2(dim1) : maxNumThreads;
  let blockWidth = Math.min(dim0Pow2, kWarpSize);
  const blockHeight = Math.min(dim1Pow2, Math.floor(maxNumThreads / blockWidth));
  blockWidth = Math.min(dim0Pow2, Math.floor(maxNumThreads / blockHeight));
  const numThreads = blockWidth * blockHeight;

  let stepInput = 1;
  let stepOutput = 1;
  const inputMult = [0, 0, 0];
  const splitInput = (parallelism: number) => {
    const step = stepInput;
    stepInput *= parallelism;
    return step;
  };
  const splitOutput = (parallelism: number) => {
    const step = stepOutput;
    stepOutput *= parallelism;
    return step;
  };
  const valuesPerThread = () => divUp(inputsPerOutput, stepInput);

  if (reduceFastest) inputMult[0] = splitInput(blockWidth);
  else splitOutput(blockWidth);
  if (valuesPerThread() >= blockHeight * 16 || valuesPerThread() >= kMaxValuesPerThread) inputMult[1] = splitInput(blockHeight);
  else splitOutput(blockHeight);

  const blocksPerSm = Math.floor(device.maxThreadsPerMultiProcessor / numThreads);
  const targetGridSize = device.multiProcessorCount * blocksPerSm;
  const gridX = divUp(Math.floor(numOutputs / outputVecSize), stepOutput);
  let ctasPerOutput = 1;
  if (inputMult[1] !== 0 && valuesPerThread() >= kMaxValuesPerThread && gridX <= targetGridSize) {
    const c1 = divUp(targetGridSize, gridX);
    const c2 = divUp(valuesPerThread(), kMinValuesPerThread);
    const c3 = divUp(valuesPerThread(), kMaxValuesPerThread);
    ctasPerOutput = Math.max(Math.min(c1, c2), c3);
    if (ctasPerOutput > 1) inputMult[2] = splitInput(ctasPerOutput);
  }
  if (inputMult[2] === 0) return [0, 0];
  let buffer = shape.accumulateBytes * numOutputs * ctasPerOutput;
  if (inputMult[0] === 0) buffer *= blockWidth * outputVecSize;
  return [buffer, 4 * gridX];
}
