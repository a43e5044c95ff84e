/** A Hugging Face config.json's model: the implementation its `model_type` names. */
import { InputError } from '../../errors.ts';
import type { TrainableModel } from '../model.ts';
import type { HfConfig } from './config.ts';
import { gpt2Model, type HfModelOptions } from './gpt2.ts';
import { llamaModel } from './llama.ts';
import { bertModel } from './bert.ts';
import { gemmaModel } from './gemma.ts';

export function hfModel(cfg: HfConfig, options: HfModelOptions): TrainableModel {
  const positions = cfg.family === 'gpt2' ? cfg.positions : cfg.family === 'bert' ? cfg.maxPositions - cfg.positionOffset : cfg.maxPositions;
  if (options.seqLen > positions) throw new InputError('training.seq_len', `${options.seqLen} is more than the model's ${positions} positions`);
  switch (cfg.family) {
    case 'gpt2':
      return gpt2Model(cfg, options);
    case 'llama':
      return llamaModel(cfg, options, options.tuning);
    case 'gemma':
      return gemmaModel(cfg, options, options.tuning);
    case 'bert':
      return bertModel(cfg, options);
  }
}
