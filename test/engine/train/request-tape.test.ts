/**
 * What a recorded request tape allocates under (engine/train/step-replay.ts): the recorder keeps the storages and
 * the requests, and the tape reads each storage's size and names off it when the recording is over. A replay gives
 * the allocator the label it was given when the storage was allocated (its first name, or the allocator's own
 * label where that differed), and the storage the name it had once the recording was over.
 */
import { describe, expect, it } from 'vitest';
import { CachingAllocator } from '../../../engine/allocator/caching-allocator.ts';
import { parseAllocatorConf } from '../../../engine/allocator/config.ts';
import { SimulatedDevice } from '../../../engine/allocator/device-memory.ts';
import { CudaDevice } from '../../../engine/tensor/cuda.ts';
import type { Storage } from '../../../engine/tensor/tensor.ts';
import { RequestTape, StepRecorder } from '../../../engine/train/step-replay.ts';

function device(trace: string[] = []) {
  const allocator = new CachingAllocator({
    config: parseAllocatorConf('', 'conf'),
    device: new SimulatedDevice(80 * 2 ** 30),
    totalGlobalMemBytes: 80 * 2 ** 30,
    nonPyTorchBytes: 0,
    onTrace: (action, _addr, size, _stream, label) => trace.push(`${action} ${size} ${label ?? ''}`),
  });
  return new CudaDevice(allocator, { cublasBytes: 0, cublasLtBytes: 0 }, { multiProcessorCount: 132, maxThreadsPerMultiProcessor: 2048 });
}

describe('a request tape', () => {
  it('replays each storage under the allocator label it was allocated under, and names it as the recording ended', () => {
    const recordedTrace: string[] = [];
    const cuda = device(recordedTrace);
    const recorder = new StepRecorder(cuda);
    cuda.observer = recorder;
    const a = cuda.allocateStorage(1024, 'a', 'temporary', 'a (as the allocator was told)');
    const b = cuda.allocateStorage(4096, 'b', 'temporary');
    const c = cuda.allocateStorage(2 << 20, 'c', 'activation');
    cuda.rename(b, 'w.grad', 'gradient'); // AccumulateGrad steals it
    cuda.freeStorage(a);
    cuda.freeStorage(c);
    cuda.observer = null;
    const tape = new RequestTape(recorder);
    expect(tape.storageCount).toBe(3);

    const replayTrace: string[] = [];
    const replayDevice = device(replayTrace);
    const current: Storage[] = [];
    tape.replay(replayDevice, 0, tape.requests.length, 0, 0, null, current);
    expect(replayTrace).toEqual(recordedTrace);
    expect(replayTrace.filter((e) => e.startsWith('alloc '))).toEqual(['alloc 1024 a (as the allocator was told)', 'alloc 4096 b', 'alloc 2097152 c']);
    expect(current.map((s) => [s.label, s.category, s.nbytes])).toEqual([
      ['a', 'temporary', 1024],
      ['w.grad', 'gradient', 4096],
      ['c', 'activation', 2 << 20],
    ]);
    expect(current.map((s) => s.block === null)).toEqual([true, false, true]);
  });
});
