"""What transformers does with classifier heads, for memplan's sequence and token classifiers (issue 14).

    python3 probe_classifier_heads.py > heads.txt

Prints, on the GPU machine (transformers 5.17, PEFT 0.21, PyTorch 2.11): the loss code of BERT's and RoBERTa's
sequence and token classifiers and of transformers' ForSequenceClassificationLoss and ForTokenClassification;
whether PretrainedConfig takes a problem_type outside its three values; whether MSELoss's backward runs on bf16 and
fp16 logits with float32 labels (BERT and Llama, num_labels 1, one step); which model types have a
ForTokenClassification class; XLMRobertaForTokenClassification's module order; what PEFT's TOKEN_CLS task trains;
GenericForTokenClassification's default dropout. test/fixtures/device/h100_classifier_heads.json holds what it
printed on the H100 (2026-11-27), and test/engine/models/token-classifier.test.ts checks memplan against it.
"""
import inspect

import peft
import torch
import transformers
from transformers import modeling_layers
from transformers.loss import loss_utils
from transformers.models.bert import modeling_bert
from transformers.models.roberta import modeling_roberta
from transformers.models.xlm_roberta import modeling_xlm_roberta

print("torch", torch.__version__, "transformers", transformers.__version__, "peft", peft.__version__)
for cls in (modeling_bert.BertForSequenceClassification, modeling_roberta.RobertaForSequenceClassification,
            modeling_bert.BertForTokenClassification, modeling_roberta.RobertaForTokenClassification,
            modeling_xlm_roberta.XLMRobertaForTokenClassification):
    print("=====", cls.__name__, "__init__\n", inspect.getsource(cls.__init__))
    src = inspect.getsource(cls.forward)
    print("=====", cls.__name__, "forward from its base model's call\n", src[src.find("outputs = self"):][:1800])
print(inspect.getsource(loss_utils.ForSequenceClassificationLoss))
print(inspect.getsource(loss_utils.ForTokenClassification))
print(inspect.getsource(modeling_layers.GenericForTokenClassification))

try:
    print("problem_type 'mult' accepted:", transformers.BertConfig(problem_type="mult").problem_type)
except Exception as error:
    print("problem_type 'mult' refused:", type(error).__name__, error)

for dtype in (torch.bfloat16, torch.float16):
    for kind in ("bert", "llama"):
        if kind == "bert":
            config = transformers.BertConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2, intermediate_size=128, num_labels=1)
            model = transformers.BertForSequenceClassification(config)
        else:
            config = transformers.LlamaConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2, num_key_value_heads=2,
                                              intermediate_size=128, num_labels=1, pad_token_id=0, vocab_size=1000)
            model = transformers.LlamaForSequenceClassification(config)
        model = model.to(dtype).cuda()
        ids = torch.randint(1, 1000, (4, 16), device="cuda")
        try:
            loss = model(input_ids=ids, labels=torch.rand(4, device="cuda")).loss
            print(kind, dtype, "forward ok, loss dtype", loss.dtype)
            loss.backward()
            print(kind, dtype, "backward ok")
        except Exception as error:
            print(kind, dtype, "FAILED:", type(error).__name__, str(error)[:300])

for name in ["Llama", "Mistral", "Qwen2", "Qwen3", "Phi3", "Mixtral", "Qwen3Moe", "SmolLM3", "Olmo2", "Gemma2", "Gemma3Text", "Gemma3", "GPT2"]:
    print(name, "ForTokenClassification", hasattr(transformers, f"{name}ForTokenClassification"))
xlmr = transformers.XLMRobertaForTokenClassification(transformers.XLMRobertaConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2, intermediate_size=128, num_labels=3))
print("xlmr tok modules:", list(xlmr._modules))
bert = transformers.BertForTokenClassification(transformers.BertConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2, intermediate_size=128, num_labels=3))
bert = peft.get_peft_model(bert, peft.LoraConfig(r=4, target_modules=["query", "value"], task_type="TOKEN_CLS"))
print("peft TOKEN_CLS trainable (bert):", [n for n, p in bert.named_parameters() if p.requires_grad])
llama = transformers.LlamaForTokenClassification(transformers.LlamaConfig(num_hidden_layers=1, hidden_size=64, num_attention_heads=2, num_key_value_heads=2, intermediate_size=128, num_labels=5, vocab_size=100))
print("llama tok last parameters:", [(n, tuple(p.shape)) for n, p in llama.named_parameters()][-3:], "dropout p", llama.dropout.p)
llama = peft.get_peft_model(llama, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="TOKEN_CLS"))
print("peft TOKEN_CLS trainable (llama):", [n for n, p in llama.named_parameters() if p.requires_grad])
