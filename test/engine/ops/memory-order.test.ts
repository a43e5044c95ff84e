/**
 * Memory order (engine/tensor/tensor.ts: TensorImpl.memoryOrder, reshapedMemoryOrder, obeysLayoutContract), where
 * a model's tensors are laid out other than contiguous: which reshapes of a gradient are views and which copy
 * (`computeStride`, aten/src/ATen/TensorUtils.cpp), and when AccumulateGrad may steal a gradient
 * (`obeys_layout_contract`, torch/csrc/autograd/utils/grad_layout_contract.h). The values are what PyTorch gives:
 * `x = torch.empty(L, B, E).transpose(0, 1)` is a [B, L, E] tensor with strides (E, B*E, 1).
 */
import { describe, expect, it } from 'vitest';
import { Storage, Tensor, TensorImpl, elementwiseMemoryOrder, isContiguous, obeysLayoutContract, reshapedMemoryOrder } from '../../../engine/tensor/tensor.ts';

const tensor = (shape: number[], order: number[] | null) => {
  const t = new Tensor(shape, 'float32', new TensorImpl(new Storage(4, null, 't', 'temporary'), null));
  t.impl.memoryOrder = order;
  return t;
};

describe('reshapedMemoryOrder (computeStride)', () => {
  it('a contiguous tensor reshapes to any shape as a view, still contiguous', () => {
    expect(reshapedMemoryOrder([8, 197, 768], null, [8 * 197, 768])).toBeNull();
    expect(reshapedMemoryOrder([8, 197, 768], null, [8, 197, 12, 64])).toBeNull();
  });

  it('[B, L, E] over [L, B, E] memory: folding B and L for a mm is no view (reshape copies); splitting E is one, in the same order', () => {
    // x.transpose(0, 1).reshape(B * L, E) copies; .view raises "view size is not compatible"
    expect(reshapedMemoryOrder([8, 197, 768], [1, 0, 2], [8 * 197, 768])).toBeUndefined();
    // .view(B, L, H, D): strides (E, B*E, D, 1): L outermost, then B, H, D
    expect(reshapedMemoryOrder([8, 197, 768], [1, 0, 2], [8, 197, 12, 64])).toEqual([1, 0, 2, 3]);
  });

  it('a dimension of one element takes any stride: with B = 1 the transposed tensor folds as a view', () => {
    expect(reshapedMemoryOrder([1, 197, 768], [1, 0, 2], [197, 768])).toBeNull();
  });
});

describe('obeysLayoutContract', () => {
  it('equal memory orders obey; a contiguous gradient for a transposed variable, or the other way round, does not', () => {
    expect(obeysLayoutContract(tensor([8, 197, 768], [1, 0, 2]), tensor([8, 197, 768], [1, 0, 2]))).toBe(true);
    expect(obeysLayoutContract(tensor([8, 197, 768], null), tensor([8, 197, 768], [1, 0, 2]))).toBe(false);
    expect(obeysLayoutContract(tensor([8, 197, 768], [1, 0, 2]), tensor([8, 197, 768], null))).toBe(false);
  });

  it('only dimensions of more than one element are compared: with B = 1 the two layouts have the same strides', () => {
    expect(obeysLayoutContract(tensor([1, 197, 768], null), tensor([1, 197, 768], [1, 0, 2]))).toBe(true);
  });
});

describe('elementwiseMemoryOrder (TensorIterator reorder_dimensions)', () => {
  it('a sum is laid out as its first operand; a contiguous first operand makes it contiguous whatever the second', () => {
    expect(elementwiseMemoryOrder([8, 197, 768], [tensor([8, 197, 768], [1, 0, 2]), tensor([8, 197, 768], null)])).toEqual([1, 0, 2]);
    expect(elementwiseMemoryOrder([8, 197, 768], [tensor([8, 197, 768], null), tensor([8, 197, 768], [1, 0, 2])])).toBeNull();
  });

  it('a broadcast first operand decides only the pairs where it has both strides: the second decides the rest', () => {
    // pos[1, L, E] + b[B, L, E] laid out [B, E, L]: pos decides L against E (contiguous), b puts B outermost
    expect(elementwiseMemoryOrder([8, 197, 768], [tensor([1, 197, 768], null), tensor([8, 197, 768], [0, 2, 1])])).toBeNull();
    // with b laid out [L, B, E], b decides B against L and E
    expect(elementwiseMemoryOrder([8, 197, 768], [tensor([1, 197, 768], null), tensor([8, 197, 768], [1, 0, 2])])).toEqual([1, 0, 2]);
  });
});

describe('isContiguous', () => {
  it('contiguous strides in every dimension of more than one element', () => {
    expect(isContiguous(tensor([8, 197, 768], null))).toBe(true);
    expect(isContiguous(tensor([8, 197, 768], [1, 0, 2]))).toBe(false);
    expect(isContiguous(tensor([1, 197, 768], [1, 0, 2]))).toBe(true);
  });
});
