/**
 * The classes a config.json's `architectures` may name that return no loss from `model(input_ids=ids,
 * labels=ids)` in transformers 5.x, so the Trainer cannot train them (engine/models/hf/config.ts `withoutLoss`):
 * every model type's bare `<Model>Model` (hidden states, no head) and BertForPreTraining (its loss needs
 * next_sentence_label too). They were trained as the masked LM before, silently; now each is refused at
 * `model.hf_config.architectures` with what to plan instead. The heads memplan trains still resolve.
 */
import { describe, expect, it } from 'vitest';
import { HF_MODEL_TYPES, resolveHfConfig } from '../../../engine/models/hf/config.ts';
import { safeParsePlan } from '../../../engine/plan/parse.ts';
import { InputError } from '../../../engine/errors.ts';

/** Each simulated model type's bare model and the head a config without `architectures` trains. */
const BARE: Record<string, [bare: string, head: string]> = {
  gpt2: ['GPT2Model', 'GPT2LMHeadModel'],
  llama: ['LlamaModel', 'LlamaForCausalLM'],
  mistral: ['MistralModel', 'MistralForCausalLM'],
  qwen2: ['Qwen2Model', 'Qwen2ForCausalLM'],
  qwen3: ['Qwen3Model', 'Qwen3ForCausalLM'],
  phi3: ['Phi3Model', 'Phi3ForCausalLM'],
  mixtral: ['MixtralModel', 'MixtralForCausalLM'],
  qwen3_moe: ['Qwen3MoeModel', 'Qwen3MoeForCausalLM'],
  smollm3: ['SmolLM3Model', 'SmolLM3ForCausalLM'],
  olmo2: ['Olmo2Model', 'Olmo2ForCausalLM'],
  gemma2: ['Gemma2Model', 'Gemma2ForCausalLM'],
  gemma3_text: ['Gemma3TextModel', 'Gemma3ForCausalLM'],
  bert: ['BertModel', 'BertForMaskedLM'],
  roberta: ['RobertaModel', 'RobertaForMaskedLM'],
  'xlm-roberta': ['XLMRobertaModel', 'XLMRobertaForMaskedLM'],
};

/** Where and why resolving the config fails. */
function refusal(config: Record<string, unknown>): { where: string; problem: string } {
  try {
    resolveHfConfig(config);
  } catch (error) {
    if (error instanceof InputError) return { where: error.where, problem: error.problem };
    throw error;
  }
  throw new Error('expected a refusal');
}

/** The head a config trains (GPT-2: its language model, the only one). */
const headOf = (config: Record<string, unknown>) => {
  const cfg = resolveHfConfig(config);
  return cfg.family === 'gpt2' ? { kind: 'causal_lm' } : cfg.head;
};

const plan = (hf_config: Record<string, unknown>) => ({ format: 'memplan.plan', version: 1, model: { hf_config }, training: { batch_size: 2, seq_len: 64 } });

describe('architectures that return no loss from input_ids and labels are refused, with what to plan instead', () => {
  it('BertForPreTraining: its loss is None without next_sentence_label (modeling_bert.py), so it is not trained as BertForMaskedLM', () => {
    expect(refusal({ model_type: 'bert', architectures: ['BertForPreTraining'] })).toEqual({
      where: 'model.hf_config.architectures',
      problem:
        '"BertForPreTraining" returns no loss from input_ids and labels alone: it adds its next-sentence loss to the masked-LM loss only when next_sentence_label is given too (else its loss is None), and the Trainer raises "The model did not return a loss from the inputs"; plan BertForMaskedLM instead (the same encoder and masked-LM head, without the pooler and the next-sentence classifier): set architectures to ["BertForMaskedLM"], or leave architectures out',
    });
    // a plan says it at the field, and nothing else
    const r = safeParsePlan(plan({ model_type: 'bert', num_hidden_layers: 2, architectures: ['BertForPreTraining'] }));
    expect(r.ok ? [] : r.issues.map((i) => i.path)).toEqual(['model.hf_config.architectures']);
  });

  it('BertModel, the bare encoder: hidden states and no loss', () => {
    expect(refusal({ model_type: 'bert', architectures: ['BertModel'] })).toEqual({
      where: 'model.hf_config.architectures',
      problem:
        '"BertModel" is the bare model: it returns hidden states and no loss, and the Trainer raises "The model did not return a loss from the inputs"; plan BertForMaskedLM instead: set architectures to ["BertForMaskedLM"], or leave architectures out',
    });
  });

  it.each(Object.entries(BARE))('%s: its bare model is refused, naming the head it trains without architectures', (modelType, [bare, head]) => {
    expect(HF_MODEL_TYPES).toContain(modelType);
    const { where, problem } = refusal({ model_type: modelType, architectures: [bare] });
    expect(where).toBe('model.hf_config.architectures');
    expect(problem).toBe(`"${bare}" is the bare model: it returns hidden states and no loss, and the Trainer raises "The model did not return a loss from the inputs"; plan ${head} instead: set architectures to ["${head}"], or leave architectures out`);
    // the head named is the one a config without architectures trains, and it resolves
    expect(headOf({ model_type: modelType, architectures: [head] })).toEqual(headOf({ model_type: modelType }));
  });

  it('every simulated model type is covered', () => {
    expect(Object.keys(BARE).sort()).toEqual([...HF_MODEL_TYPES].sort());
  });

  it('the heads memplan trains still resolve, as before', () => {
    expect(headOf({ model_type: 'bert', architectures: ['BertForMaskedLM'] })).toEqual({ kind: 'masked_lm' });
    expect(headOf({ model_type: 'roberta', architectures: ['RobertaForMaskedLM'] })).toEqual({ kind: 'masked_lm' });
    expect(headOf({ model_type: 'xlm-roberta', architectures: ['XLMRobertaForMaskedLM'] })).toEqual({ kind: 'masked_lm' });
    expect(headOf({ model_type: 'bert' })).toEqual({ kind: 'masked_lm' });
    expect(headOf({ model_type: 'bert', architectures: ['BertForSequenceClassification'] })).toMatchObject({ kind: 'sequence_classification' });
    expect(headOf({ model_type: 'roberta', architectures: ['RobertaForTokenClassification'] })).toMatchObject({ kind: 'token_classification' });
    expect(headOf({ model_type: 'llama', architectures: ['LlamaForCausalLM'] })).toEqual({ kind: 'causal_lm' });
    expect(resolveHfConfig({ model_type: 'gpt2', architectures: ['GPT2LMHeadModel'] }).family).toBe('gpt2');
    // another class memplan does not train is said as before
    expect(refusal({ model_type: 'bert', architectures: ['BertForQuestionAnswering'] }).problem).toBe(
      '"BertForQuestionAnswering" is not simulated yet; memplan trains BertForMaskedLM or BertForSequenceClassification or BertForTokenClassification for this model_type',
    );
  });
});
