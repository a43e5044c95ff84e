/** What the training step needs from a model, however the plan described it. */
import type { Runtime } from '../ops/runtime.ts';
import type { DType } from '../tensor/dtype.ts';
import type { Tensor } from '../tensor/tensor.ts';

export interface ParameterSpec {
  /** The name `model.named_parameters()` gives. */
  name: string;
  shape: number[];
  dtype: DType;
  /** A buffer (moved to the GPU with the parameters, in the same walk, but not trained). */
  buffer?: boolean;
  /** A LoRA adapter's weight (models/peft/lora.ts). */
  adapter?: boolean;
  /**
   * The trainable copy PEFT keeps of a module (`modules_to_save`), beside the frozen original: trains under LoRA.
   * What keeps it: the task (PEFT's task_type) for a sequence or token classifier's classifier, or the plan's
   * `training.lora.modules_to_save`.
   */
  savedModule?: 'SEQ_CLS' | 'TOKEN_CLS' | 'modules_to_save';
  /**
   * A copy made for `training.lora.modules_to_save`: the name of the original parameter it stands in for, the name
   * the model's forward reads (ModulesToSaveWrapper.forward calls the copy); then, with ensure_weight_tying, the
   * tied modules' weights it also runs as.
   */
  runsAs?: string[];
  /**
   * The weight of a module LoRA can adapt, and the module's class: an `nn.Linear` (`linearParameters`), or GPT-2's
   * `Conv1D`, which PEFT wraps the same way. Its module's name is what target_modules name.
   */
  loraModule?: 'nn.Linear' | 'Conv1D';
  /** The weight of the model's output embeddings (`get_output_embeddings()`: an untied lm_head), which "all-linear" leaves out. */
  outputEmbeddings?: boolean;
  /**
   * A mixture of experts' router (an nn.Linear PEFT adapts: "all-linear" takes it) or its experts' fused 3-D
   * weights (which PEFT 0.21's "all-linear" adapts too, through a parameter wrapper).
   */
  moe?: 'router' | 'experts';
  /** Does not require grad (a base weight under LoRA, or matched by `training.freeze`): no gradient, no optimizer state. */
  frozen?: boolean;
}

export interface TrainableModel {
  /**
   * Parameters and buffers in the order `model.to("cuda")` moves them (`Module._apply`: children first, then
   * the module's own parameters, then its buffers).
   */
  parameters: ParameterSpec[];
  /**
   * The order `model.parameters()` lists the parameters in, when it is not the order above: named_parameters
   * walks modules in pre-order, a module's own parameters before its children's (the optimizer's order).
   */
  optimizerOrder?: string[];
  /**
   * Modules whose weight is another module's (an LM head tied to the input embedding): named_parameters() lists the
   * weight once, under the other module, but PEFT's target_modules still match them by name.
   */
  tiedModules?: readonly string[];
  /**
   * A tied module's weight by its own name, and the parameter it is (`lm_head.weight` is
   * `model.embed_tokens.weight`): the forward reads a tied module's weight by the first name, so that a
   * modules_to_save copy of either module runs where that module runs, and the other keeps the original. A model
   * with tied modules and no entry for them takes no modules_to_save.
   */
  tiedWeights?: Readonly<Record<string, string>>;
  /**
   * Modules whose parameters are partly listed under another module or tied the other way round (a masked LM's
   * decoder, whose bias is the head's `bias`; XLM-RoBERTa's word embedding, listed as the decoder's weight):
   * modules_to_save does not copy them here.
   */
  uncopiedModules?: readonly string[];
  /** The module `get_input_embeddings()` returns (`model.embed_tokens`, GPT-2's `transformer.wte`): what PEFT ties to. */
  inputEmbeddings?: string;
  /**
   * Modules with neither parameters nor buffers (activations, dropouts), as `named_modules()` names them:
   * target_modules can match them too, and PEFT refuses them (measured: h100_lora_targets.json).
   */
  parameterlessModules?: readonly string[];
  /** Each parameter's and buffer's tensor by name, filled as they reach the GPU; the forward reads it. */
  readonly tensors: Map<string, Tensor>;
  /** One micro-batch created on the GPU, in creation order. */
  makeInputs(rt: Runtime, batch: number): Tensor[];
  /** Forward and loss (the caller owns the returned loss; every intermediate is released or saved by autograd). */
  loss(rt: Runtime, inputs: readonly Tensor[]): Tensor;
  /**
   * The previous micro-step's loss was rebound, and the graph it held dies: what the model tied to that graph
   * (a leaf made by `enable_input_require_grads`, with its `.grad`) is freed.
   */
  releaseGraph?(rt: Runtime): void;
}
