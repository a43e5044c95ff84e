/**
 * Mixtral's sparse mixture of experts (transformers 5.17 modeling_mixtral.py `MixtralSparseMoeBlock`, its
 * `MixtralTopKRouter`, and `MixtralExperts` as `@use_experts_implementation` dispatches it), trained; and
 * Qwen3-MoE's (modeling_qwen3_moe.py), whose experts and block are the same code and whose router differs
 * (`router`, MoeConfig.kind).
 *
 * Note [Experts implementation]: `PreTrainedModel.get_correct_experts_implementation` picks "grouped_mm" unless
 * `from_pretrained(..., experts_implementation=...)` asks otherwise, so training runs integrations/moe.py
 * `grouped_mm_experts_forward`, not the per-expert loop of `MixtralExperts.forward`: the S = tokens x top_k routed
 * rows are sorted by expert, gathered, sent through two grouped GEMMs over the whole 3-D weights
 * (`torch.nn.functional.grouped_mm` with the experts' row offsets), weighted, put back in token order and summed
 * over top_k. Every allocation is sized by S, tokens, hidden, intermediate and the expert count, never by how many
 * rows an expert gets: routing does not change memory (Note [Routing]). Measured on the H100
 * (test/fixtures/calibration/mixtral_4l_*, recorded with the real routing of a randomly initialised router, far
 * from balanced): every allocation of the block matches in size and order.
 *
 * Note [Routing]: which experts a token goes to depends on the data and the router's weights, so memplan cannot
 * know it; with grouped_mm it does not need to. The per-expert loop (`experts_implementation="eager"`) would
 * allocate per expert (`hidden_states[token_idx]`, one linear per expert's slice of the weights) and its peak
 * would depend on the busiest expert: not simulated (it is not what transformers runs by default).
 */
import { StopRecomputation } from '../../autograd/engine.ts';
import type { AttentionDevice } from '../../ops/attention.ts';
import { mul, softmax, toDType } from '../../ops/elementwise.ts';
import { cumsumScratch } from '../../ops/cub.ts';
import { groupedMm } from '../../ops/grouped-mm.ts';
import { divInPlace, indexRows, maskedFill, maskedFillInPlace, sortInt64, sumDim, topk } from '../../ops/indexing.ts';
import { linear } from '../../ops/linear.ts';
import { viewCopyingGrad } from '../../ops/matmul.ts';
import type { Runtime } from '../../ops/runtime.ts';
import type { Tensor } from '../../tensor/tensor.ts';
import { hfActivation } from './common.ts';
import type { HfActivation, MoeConfig } from './config.ts';

export interface MoeBlockWeights {
  /** `mlp.gate.weight` [experts, hidden]. */
  router: Tensor;
  /** `mlp.experts.gate_up_proj` [experts, 2 x intermediate, hidden]. */
  gateUp: Tensor;
  /** `mlp.experts.down_proj` [experts, hidden, intermediate]. */
  down: Tensor;
}

export interface MoeBlockOptions {
  moe: MoeConfig;
  activation: HfActivation;
  device: AttentionDevice;
}

/**
 * Python locals of a frame, in `co_varnames` order: when a checkpointed recomputation stops inside it
 * (`_StopRecomputationError`), unwinding drops them in that order (measured: mixtral_4l_amp_bf16_ckpt).
 */
class Frame {
  private readonly slots = new Map<string, Tensor | null>();
  private readonly rt: Runtime;
  constructor(rt: Runtime, names: readonly string[]) {
    this.rt = rt;
    for (const n of names) this.slots.set(n, null);
  }
  /** `name = t`: the previous value's reference goes. */
  set(name: string, t: Tensor): Tensor {
    const old = this.slots.get(name) ?? null;
    this.slots.set(name, t);
    this.rt.cuda.release(old);
    return t;
  }
  get(name: string): Tensor {
    return this.slots.get(name)!;
  }
  /** The frame goes (return or exception): its locals, in order. */
  drop(): void {
    for (const [name, t] of this.slots) {
      this.rt.cuda.release(t);
      this.slots.set(name, null);
    }
  }
}

/** Runs a Python function's body: its locals die in order when it returns or a recomputation stops in it. */
function pythonFrame<T>(rt: Runtime, names: readonly string[], body: (f: Frame) => T): T {
  const f = new Frame(rt, names);
  rt.cuda.unwindingFrames++; // dropping the locals frees memory on an exception too (Note [Replayed steps])
  try {
    return body(f);
  } catch (error) {
    if (error instanceof StopRecomputation) f.drop();
    throw error;
  } finally {
    f.drop();
    rt.cuda.unwindingFrames--;
  }
}

/**
 * MixtralTopKRouter.forward on [tokens, hidden]: `F.linear` (autocast casts the weight, then the input), the
 * logits' fp32 copy (dies once softmax made its result), softmax in fp32 (its result saved), top-k values and
 * indices, and `router_top_value /= router_top_value.sum(-1, keepdim=True)` (the in-place division saves the sum
 * and a clone of the values). Returns (router_logits, routing weights fp32 [tokens, k], expert indices int64).
 * Qwen3MoeTopKRouter.forward: `softmax(router_logits, dtype=torch.float)` (bf16 logits converted inside softmax,
 * fp16 ones through half_to_float without a copy: read from the source, the recordings are bf16), the division
 * only with norm_topk_prob, then `router_top_value.to(router_logits.dtype)`: its weights are in the logits' dtype.
 */
function router(rt: Runtime, x: Tensor, weight: Tensor, moe: MoeConfig, label: string): [Tensor, Tensor, Tensor] {
  return pythonFrame(rt, ['hidden_states', 'router_logits', 'router_probs', 'router_top_value', 'router_indices', 'router_scores'], (f) => {
    const { cuda, autograd } = rt;
    f.set('hidden_states', autograd.view('ViewBackward0', x, x.shape)); // reshape(-1, hidden_dim): already that shape
    const logits = f.set('router_logits', linear(rt, f.get('hidden_states'), weight, null, `${label}.gate`));
    if (moe.kind === 'mixtral') {
      const up = toDType(rt, logits, 'float32', `${label}.gate router_logits.float()`);
      f.set('router_probs', softmax(rt, up, `${label}.gate softmax`));
      cuda.release(up);
    } else {
      // Qwen3MoeTopKRouter: `softmax(router_logits, dtype=torch.float)` (fp16 logits: softmax's half_to_float, no copy)
      f.set('router_probs', softmax(rt, logits, `${label}.gate softmax`, 'float32'));
    }
    const [values, indices] = topk(rt, f.get('router_probs'), moe.topK, `${label}.gate topk`);
    f.set('router_top_value', values);
    f.set('router_indices', indices);
    if (moe.normTopK) {
      const total = sumDim(rt, values, [...values.shape.slice(0, -1), 1], `${label}.gate router_top_value.sum(-1)`);
      f.set('router_top_value', divInPlace(rt, values, total, `${label}.gate router_top_value /= sum`));
      cuda.release(total);
    }
    // Qwen3-MoE: `router_top_value.to(router_logits.dtype)` (Mixtral's weights stay fp32)
    if (moe.kind === 'qwen3_moe') f.set('router_top_value', toDType(rt, f.get('router_top_value'), logits.dtype, `${label}.gate router_top_value.to(router_logits.dtype)`));
    f.set('router_scores', cuda.ref(f.get('router_top_value')));
    return [cuda.ref(logits), cuda.ref(f.get('router_scores')), cuda.ref(f.get('router_indices'))];
  });
}

/** integrations/moe.py `grouped_mm_experts_forward` (Note [Experts implementation]) on [tokens, hidden]. */
function experts(rt: Runtime, x: Tensor, topIndex: Tensor, topWeights: Tensor, w: MoeBlockWeights, options: MoeBlockOptions, label: string): Tensor {
  const names = ['sample_weights', 'expert_ids', 'expert_ids_g', 'perm', 'selected_hidden_states_g', 'sample_weights_g', 'histc_input', 'tokens_per_expert', 'offsets', 'sentinel_mask', 'proj_out', 'weighted_out', 'inv_perm', 'final_hidden_states'];
  return pythonFrame(rt, names, (f) => {
    const { cuda, autograd } = rt;
    const { experts: e, topK: k } = options.moe;
    const [tokens, hidden] = x.shape as [number, number];
    const s = tokens * k;
    f.set('sample_weights', autograd.view('ViewBackward0', topWeights, [s]));
    f.set('expert_ids', cuda.view(topIndex, [s]));
    const [sortedIds, perm] = sortInt64(rt, f.get('expert_ids'), `${label} torch.sort(expert_ids)`);
    f.set('expert_ids_g', sortedIds);
    f.set('perm', perm);
    // `hidden_states[perm // num_top_k]`: the floor division is the gather's index, a temporary IndexBackward0 saves
    const tokenOfRow = cuda.empty([s], 'int64', `${label} perm // num_top_k`, 'activation');
    f.set('selected_hidden_states_g', indexRows(rt, x, tokenOfRow, `${label} hidden_states[perm // num_top_k]`));
    cuda.release(tokenOfRow);
    f.set('sample_weights_g', indexRows(rt, f.get('sample_weights'), f.get('perm'), `${label} sample_weights[perm]`));
    f.set('histc_input', cuda.empty([s], 'int32', `${label} expert_ids_g.int()`, 'activation'));
    f.set('tokens_per_expert', cuda.empty([e], 'int32', `${label} torch.histc`, 'activation'));
    f.set('offsets', cuda.empty([e], 'int32', `${label} offsets (cumsum)`, 'activation'));
    cumsumScratch(rt, [e], 0, 'int32', `${label} cumsum`);
    // `(expert_ids_g >= num_experts).unsqueeze(-1)`; then `expert_ids_g.clamp_(...)` in place
    const beyond = cuda.empty([s], 'bool', `${label} sentinel_mask`, 'activation');
    f.set('sentinel_mask', cuda.view(beyond, [s, 1]));
    cuda.release(beyond);
    const mask = f.get('sentinel_mask');
    f.set('selected_hidden_states_g', maskedFillInPlace(rt, f.get('selected_hidden_states_g'), mask, `${label} selected_hidden_states_g.masked_fill_`));
    // _grouped_linear: `_grouped_mm(input.to(weight.dtype), weight.transpose(-2, -1), offs)`; the input is already
    // in the weights' dtype (bf16 and bf16, or fp32 activations and fp32 weights under autocast, which grouped_mm
    // is not part of)
    const gateUpT = autograd.view('TransposeBackward0', w.gateUp, [e, hidden, w.gateUp.shape[1]!]);
    f.set('proj_out', groupedMm(rt, f.get('selected_hidden_states_g'), gateUpT, f.get('offsets'), options.device, `${label}.experts gate_up grouped_mm`));
    cuda.release(gateUpT);
    f.set('proj_out', maskedFill(rt, f.get('proj_out'), mask, `${label}.experts gate_up masked_fill`));
    f.set('proj_out', applyGate(rt, f.get('proj_out'), options.activation, label));
    const downT = autograd.view('TransposeBackward0', w.down, [e, w.down.shape[2]!, hidden]);
    f.set('proj_out', groupedMm(rt, f.get('proj_out'), downT, f.get('offsets'), options.device, `${label}.experts down grouped_mm`));
    cuda.release(downT);
    f.set('proj_out', maskedFill(rt, f.get('proj_out'), mask, `${label}.experts down masked_fill`));
    // `proj_out * sample_weights_g.unsqueeze(-1)`: bf16 x fp32 (Mixtral's weights) promotes to fp32 [S, hidden]
    const weightsColumn = autograd.view('UnsqueezeBackward0', f.get('sample_weights_g'), [s, 1]);
    f.set('weighted_out', mul(rt, f.get('proj_out'), weightsColumn, `${label} proj_out * sample_weights_g`));
    cuda.release(weightsColumn);
    // `inv_perm = torch.empty_like(perm); inv_perm[perm] = torch.arange(S)`: index_put_ without accumulation
    f.set('inv_perm', cuda.empty([s], 'int64', `${label} inv_perm`, 'activation'));
    cuda.release(cuda.empty([s], 'int64', `${label} torch.arange(S)`, 'activation'));
    f.set('weighted_out', indexRows(rt, f.get('weighted_out'), f.get('inv_perm'), `${label} weighted_out[inv_perm]`));
    // `.view(num_tokens, num_top_k, hidden_dim).sum(dim=1)`: the view's backward reshapes SumBackward1's expanded
    // gradient, a copy [S, hidden]
    const grouped = viewCopyingGrad(rt, f.get('weighted_out'), [tokens, k, hidden], `${label} weighted_out.view(tokens, top_k, hidden)`, 'ViewBackward0');
    f.set('final_hidden_states', sumDim(rt, grouped, [tokens, hidden], `${label} .sum(dim=1)`));
    cuda.release(grouped);
    return toDType(rt, f.get('final_hidden_states'), x.dtype, `${label} final_hidden_states.to(hidden_states.dtype)`);
  });
}

/** `_default_apply_gate`: `gate, up = gate_up_out.chunk(2, dim=-1); return self.act_fn(gate) * up`. */
function applyGate(rt: Runtime, gateUp: Tensor, activation: HfActivation, label: string): Tensor {
  const { cuda, autograd } = rt;
  const half = [...gateUp.shape.slice(0, -1), gateUp.shape[gateUp.shape.length - 1]! / 2];
  const gate = cuda.view(gateUp, half);
  const up = cuda.view(gateUp, half);
  // SplitBackward0 concatenates the two gradients into one [S, 2 x intermediate] tensor
  autograd.record('SplitBackward0', [gateUp], [gate, up], [], (grads) => {
    if (!grads.some((g) => g)) return [null];
    const zeros = grads.map((g) => (g ? null : cuda.empty(half, gateUp.dtype, `${label} chunk backward: zeros for a missing gradient`)));
    const out = cuda.empty(gateUp.shape, grads.find((g) => g)!.dtype, `grad of ${label} gate_up chunk`);
    for (const z of zeros) cuda.release(z);
    return [out];
  });
  const act = hfActivation(rt, activation, gate, `${label}.experts act_fn(gate)`);
  const out = mul(rt, act, up, `${label}.experts act_fn(gate) * up`);
  cuda.release(act);
  cuda.release(up);
  cuda.release(gate);
  return out;
}

/**
 * MixtralSparseMoeBlock.forward (and Qwen3MoeSparseMoeBlock's, the same but for its local names) on [B, T, hidden]
 * (router_jitter_noise 0: the config refuses more):
 * `hidden_states.view(-1, hidden)`, the router, the experts, `reshape(B, T, hidden)`. Its locals `_` (the router
 * logits), the routing weights and indices die when it returns (autograd keeps what it saved).
 */
export function sparseMoeBlock(rt: Runtime, x: Tensor, w: MoeBlockWeights, options: MoeBlockOptions, label: string): Tensor {
  return pythonFrame(rt, ['hidden_states', '_', 'top_k_weights', 'top_k_index'], (f) => {
    const { autograd } = rt;
    const [b, t, hidden] = x.shape as [number, number, number];
    f.set('hidden_states', autograd.view('ViewBackward0', x, [b * t, hidden]));
    const [logits, weights, index] = router(rt, f.get('hidden_states'), w.router, options.moe, label);
    f.set('_', logits);
    f.set('top_k_weights', weights);
    f.set('top_k_index', index);
    f.set('hidden_states', experts(rt, f.get('hidden_states'), index, weights, w, options, label));
    f.set('hidden_states', autograd.view('ViewBackward0', f.get('hidden_states'), [b, t, hidden]));
    return rt.cuda.ref(f.get('hidden_states'));
  });
}
