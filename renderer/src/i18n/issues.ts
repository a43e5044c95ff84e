/**
 * A problem's message in the interface's language. The shell's own checks use message codes (`local:...`); the
 * engine's messages (the plan schema's, a config.json's, the simulator's refusals) are English sentences of fixed
 * shapes, worded again here for Chinese with their names, numbers and quoted values kept as the engine wrote them.
 * A message of another shape is shown as the engine wrote it.
 *
 * The schema's messages may end with what was given (engine/plan/issues.ts `given`): `, got 1.5`,
 * `, got "8" (text)`, `, got a list`. `GOT` matches that tail, `got` words it. A group that took no part in the
 * match reaches its wording as ''.
 */
import type { Messages } from './index.ts';
import type { Locale } from './types.ts';

const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
/** A fixed message, matched as it is. */
const exactly = (text: string) => new RegExp(`^${escape(text)}$`);

/** A value a message says was given (`"8" (text)`, `a list`, `an object`, `1.5`, `null`). */
function given(value: string): string {
  const text = /^(".*") \(text\)$/s.exec(value);
  if (text) return `${text[1]}（文本）`;
  return value === 'a list' ? '列表' : value === 'an object' ? '对象' : value;
}

/** The optional tail `, got <value>`. */
const GOT = '(?:, got (.+))?$';
const got = (value: string) => (value ? `，实际为 ${given(value)}` : '');

/** The schema's words for a type (engine/plan/issues.ts TYPE_WORDS). */
const TYPE_WORDS: Record<string, string> = {
  'a number': '数字',
  'a whole number': '整数',
  text: '文本',
  'true or false': 'true 或 false',
  'a list': '列表',
  'an object': '对象',
};
const typeWord = (t: string) => TYPE_WORDS[t] ?? t;

/** The optional tail `; did you mean "x"?` (or `one of "x", "y"`). */
const DID_YOU_MEAN = '(?:; did you mean (.+)\\?)?$';
const didYouMean = (names: string) => (names ? `；是否想输入${names.startsWith('one of ') ? `以下之一：${names.slice('one of '.length)}` : ` ${names}`}？` : '');

/** JSON strings joined by " or " (an escaped quote inside a name is no joint). */
const orQuoted = (list: string) => list.replace(/(?<!\\)" or "/g, '" 或 "');
/** Class names joined by " or ". */
const orNames = (list: string) => list.split(' or ').join(' 或 ');
/** "a, b and c" as a Chinese list. */
const listed = (list: string) => list.replace(/, /g, '、').replace(/ (?:and|or) /g, (w) => (w === ' and ' ? ' 和 ' : ' 或 '));

/** How a LoRA refusal says to stop a target from taking a module (engine/models/peft/lora.ts `fix`). */
const targetFix = (fix: string) =>
  fix === 'leave it out of target_modules' ? '请把它从 target_modules 中去掉' : fix === 'change the pattern so that it does not match it' ? '请修改正则表达式，使它不再匹配该模块' : '请改为逐一列出要加适配器的模块';

/** A count of engine/plan/limits.ts: `1,000,000`, or `more than 10^15`. */
const amount = (n: string) => n.replace(/^more than /, '超过 ');
/** Layers of a layer list, or blocks of a config.json. */
const layersWord = (what: string) => (what === 'layers' ? '层' : '个块');

/** The piece of a transformer block a limit's message names (engine/plan/limits.ts BlockPiece). */
const BLOCK_PIECES: Record<string, string> = { attention: '注意力', MLP: ' MLP ', experts: '专家' };

/** How a bound reads: `必须${BOUND[op]} n`. */
const NUMBER_BOUND: Record<string, string> = { '<=': '小于或等于', '<': '小于', '>=': '大于或等于', '>': '大于' };
const COUNT_BOUND: Record<string, string> = { '<=': '不超过', '<': '少于', '>=': '至少有', '>': '多于' };

/** engine/plan/limits.ts: how every limit's message begins, and the advice two of them end with. */
const TOO_LARGE = 'too large to simulate: ';
const tooLarge = '规模过大，无法模拟：';
const PEAK_AFTER_TWO = escape('. The peak does not change past the second micro-step: plan with 2 to see it');
const peakAfterTwo = '。峰值在第二个微步之后不再变化：设为 2 即可看到它';

const ZH_PATTERNS: [RegExp, (...groups: string[]) => string][] = [
  // The plan schema (engine/plan/schema.ts, worded by engine/plan/issues.ts)
  [new RegExp(`^must be a positive integer${GOT}`), (g) => `必须是正整数${got(g)}`],
  [new RegExp(`^must be a whole number${GOT}`), (g) => `必须是整数${got(g)}`],
  [new RegExp(`^must be zero or more${GOT}`), (g) => `必须大于或等于 0${got(g)}`],
  [new RegExp(`^must be positive${GOT}`), (g) => `必须大于 0${got(g)}`],
  [new RegExp(`^must be below (\\S+?)${GOT}`), (n, g) => `必须小于 ${n}${got(g)}`],
  [new RegExp(`^must not be empty${GOT}`), (g) => `不能为空${got(g)}`],
  // a bound the schema words no other way (engine/plan/issues.ts boundWords)
  [new RegExp(`^must be at most ([\\d.e+-]+)${GOT}`), (n, g) => `不能超过 ${n}${got(g)}`],
  [new RegExp(`^must be at least ([\\d.e+-]+)${GOT}`), (n, g) => `必须大于或等于 ${n}${got(g)}`],
  [new RegExp(`^must be less than ([\\d.e+-]+)${GOT}`), (n, g) => `必须小于 ${n}${got(g)}`],
  [new RegExp(`^must be more than ([\\d.e+-]+)${GOT}`), (n, g) => `必须大于 ${n}${got(g)}`],
  [new RegExp(`^must have at least (\\d+) items?${GOT}`), (n, g) => `至少要有 ${n} 项${got(g)}`],
  [new RegExp(`^must have at most (\\d+) items?${GOT}`), (n, g) => `最多只能有 ${n} 项${got(g)}`],
  [new RegExp(`^must have at least (\\d+) characters?${GOT}`), (n, g) => `至少要有 ${n} 个字符${got(g)}`],
  [new RegExp(`^must have at most (\\d+) characters?${GOT}`), (n, g) => `最多只能有 ${n} 个字符${got(g)}`],
  [/^name at least one module$/, () => '至少指定一个模块'],
  [/^is required \((.+)\)$/, (t) => `必填（${typeWord(t)}）`],
  [exactly('is required: the config.json of a Hugging Face model names its model_type'), () => '必填：Hugging Face 模型的 config.json 会写明它的 model_type'],
  [/^is required: one of (.+)$/, (v) => `必填，可选值：${v}`],
  [/^is required: (".*")$/, (v) => `必填，应为 ${v}`],
  [/^is required for this model_type$/, () => '此 model_type 必须提供该项'],
  [/^is required$/, () => '必填'],
  [new RegExp(`^expected one of (.+); got (.+?)${DID_YOU_MEAN}`), (v, g, c) => `应为以下之一：${v}；实际为 ${given(g)}${didYouMean(c)}`],
  [/^expected one of (.+)$/, (v) => `应为以下之一：${v}`],
  [/^expected ((?:a number|a whole number|text|true or false|a list|an object)(?: or (?:a number|a whole number|text|a list|an object))*), got (.+)$/,
    (t, g) => `应为${t.split(/ or (?!false)/).map(typeWord).join('或')}${got(g)}`],
  [/^expected (number|string|boolean|array|object|int)$/, (t) => `应为 ${t}`],
  [/^expected ("(?:[^"\\]|\\.)*"|-?\d[\d.e+-]*|true|false|null), got (.+)$/, (v, g) => `应为 ${v}${got(g)}`],
  [/^(".*") cannot be given with (.+): give one of them$/, (k, others) => `${k} 不能和 ${others.replaceAll(' and ', '、')} 同时给出：只能给其中之一`],
  [/^unknown key (".*"); accepted here: (.+)$/, (k, a) => `未知的键 ${k}；此处可用的键：${a}`],
  [new RegExp(`^unknown key (".*?")${DID_YOU_MEAN}`), (k, c) => `未知的键 ${k}${didYouMean(c)}`],
  [/^unknown keys? (.+)$/, (k) => `未知的键 ${k}`],
  [new RegExp(`^unknown layer type (.+?); accepted: (.+?)${DID_YOU_MEAN}`), (v, a, c) => `未知的层类型 ${v}；可用的类型：${a}${didYouMean(c)}`],
  [new RegExp(`^unknown value (.+?); accepted: (.+?)${DID_YOU_MEAN}`), (v, a, c) => `未知的值 ${v}；可用的值：${a}${didYouMean(c)}`],
  [new RegExp(`^unknown (\\w+) (.+?); accepted: (.+?)${DID_YOU_MEAN}`), (k, v, a, c) => `未知的 ${k} ${v}；可用的值：${a}${didYouMean(c)}`],
  [/^does not match any accepted form$/, () => '不符合任何可接受的形式'],
  // zod's own words, where the schema gives none (`.max(20)`, `.min(1)`)
  [new RegExp(`^Too (?:big|small): expected number to be ([<>]=?)(\\S+?)${GOT}`), (op, n, g) => `必须${NUMBER_BOUND[op] ?? op} ${n}${got(g)}`],
  [new RegExp(`^Too (?:big|small): expected string to have ([<>]=?)(\\d+) characters${GOT}`), (op, n, g) => `长度必须${COUNT_BOUND[op] ?? op} ${n} 个字符${got(g)}`],
  [new RegExp(`^Too (?:big|small): expected array to have ([<>]=?)(\\d+) items${GOT}`), (op, n, g) => `必须${COUNT_BOUND[op] ?? op} ${n} 项${got(g)}`],
  [/^this is a Hugging Face config\.json, not a plan: put it under model\.hf_config in a plan \((.+)\), with the training settings beside it \((.+)\)$/,
    (example, doc) => `这是 Hugging Face 的 config.json，不是方案：请把它放在方案的 model.hf_config 下（${example}），并在旁边写上训练设置（${doc}）`],

  // LoRA and frozen parameters (engine/train/simulate.ts, engine/models/peft/lora.ts, engine/models/hf/index.ts)
  [/^an? (\S+) base \(QLoRA\) needs bitsandbytes, whose memory is not modelled; plan the bf16 base instead$/,
    (bits) => `${bits} 量化的基础模型（QLoRA）需要 bitsandbytes，memplan 尚未对它的显存建模；请改用 bf16 基础模型来规划`],
  [/^no (nn\.Linear|Conv1D) of this model is named (.+); its (?:nn\.Linear|Conv1D) modules are named (.+)$/s, (kind, names, modules) => `此模型中没有名为 ${orQuoted(names)} 的 ${kind}；它的 ${kind} 模块名为：${modules}`],
  [/^LoRA is simulated for the Hugging Face model types (.+); to train part of this model, freeze the rest \(training\.freeze\)$/, (types) => `LoRA 目前只支持这些 model_type 的 Hugging Face 模型：${types}；要只训练这个模型的一部分，请冻结其余参数（training.freeze）`],
  [/^no Linear module of this model matches (.+)$/s, (names) => `此模型中没有与 ${names} 匹配的 Linear 模块`],
  [/^(".*?") names (\S+), on which memplan does not simulate an adapter \(it simulates LoRA on the (nn\.Linear|Conv1D) modules named (.+)\): (leave it out of target_modules|change the pattern so that it does not match it)$/s,
    (name, module, kind, modules, fix) => `${name} 对应模块 ${module}，memplan 不模拟它上面的 LoRA 适配器（它模拟名为 ${modules} 的 ${kind} 模块上的 LoRA）：${targetFix(fix)}`],
  [/^no (nn\.Linear|Conv1D) of this model matches (".*"); its (?:nn\.Linear|Conv1D) modules are named (.+)$/s, (kind, pattern, modules) => `此模型中没有与 ${pattern} 匹配的 ${kind}；它的 ${kind} 模块名为：${modules}`],
  [/^(".*?") (takes|names) (\S+), the token classifier PEFT's TOKEN_CLS task also keeps whole as modules_to_save: PEFT 0\.21 then raises (".*"); (name the modules to adapt instead|leave it out of target_modules|change the pattern so that it does not match it)$/s,
    (name, verb, module, error, fix) =>
      `${name} ${verb === 'takes' ? '会选中' : '对应'}模块 ${module}，即 token 分类头；PEFT 的 TOKEN_CLS 任务还会把它整个作为 modules_to_save 训练，于是 PEFT 0.21 报错 ${error}；${targetFix(fix)}`],
  [/^(".*?") takes the mixture of experts' routers and experts too \((.+?)(, \.\.\.)?\), which PEFT 0\.21 adapts and memplan does not: name the modules to adapt instead \(all-linear's others are named (.+)\)$/s,
    (name, modules, more, names) => `${name} 还会选中混合专家（MoE）的路由器和专家（${modules}${more ? ' 等' : ''}）：PEFT 0.21 会给它们加适配器，memplan 不模拟这些：请改为逐一列出要加适配器的模块（all-linear 选中的其余模块名为 ${names}）`],
  // modules_to_save (withModulesToSave)
  [/^(".*?") takes (\S+)( \(its name ends with it\))?, which target_modules adapt: PEFT 0\.21 raises (".*"); name the module whole \(its name, or its last dot-separated parts\)$/s,
    (name, module, suffix, error) => `${name} 会选中模块 ${module}${suffix ? '（它的名字以此结尾）' : ''}，而它已被 target_modules 加上了适配器：PEFT 0.21 会报错 ${error}；请写出完整的模块名（全名，或以点分隔的最后几段）`],
  [/^(".*?") takes (\S+)( \(its name ends with it\))?, a module with submodules: memplan simulates modules_to_save on modules whose parameters are their own \(an embedding, a norm, a linear layer, lm_head\); name those$/,
    (name, module, suffix) => `${name} 会选中模块 ${module}${suffix ? '（它的名字以此结尾）' : ''}，它含有子模块：memplan 只模拟直接持有参数的模块（嵌入层、归一化层、线性层、lm_head）作为 modules_to_save；请写出这些模块`],
  [/^(".*?") takes (\S+)( \(its name ends with it\))?, whose weight or bias is another module's \(tied, as a masked LM's decoder and word embedding are\), which memplan does not copy for modules_to_save; leave it out$/,
    (name, module, suffix) => `${name} 会选中模块 ${module}${suffix ? '（它的名字以此结尾）' : ''}，它的权重或偏置属于另一个模块（权重共享，如掩码语言模型的解码器与词嵌入），memplan 暂不模拟它的 modules_to_save 副本；请去掉它`],
  [/^(".*?") takes (\S+)( \(its name ends with it\))?, a part of the LoRA layer PEFT made of (\S+) \(its base_layer, lora_A, lora_B or lora_dropout\), which modules_to_save cannot keep whole; name another module$/,
    (name, module, suffix, layer) => `${name} 会选中模块 ${module}${suffix ? '（它的名字以此结尾）' : ''}，它是 PEFT 为 ${layer} 生成的 LoRA 层的一部分（base_layer、lora_A、lora_B 或 lora_dropout），modules_to_save 不能整体训练它；请指定其他模块`],
  [/^(".*?") takes (\S+)( \(its name ends with it\))?, inside (\S+), which PEFT's (SEQ_CLS|TOKEN_CLS) task keeps whole already; leave it out$/,
    (name, module, suffix, head, task) => `${name} 会选中模块 ${module}${suffix ? '（它的名字以此结尾）' : ''}，它位于 ${head} 之内，而 PEFT 的 ${task} 任务已经把 ${head} 整体训练；请去掉它`],
  [/^PEFT reads each name as part of a regular expression \(re\.match\(rf"\(\^\|\.\*\\\.\)\{name\}\(\$\|\\\.\.\*\)", module\)\), and this one is not one: (".*")$/s,
    (error) => `PEFT 把每个名字当作正则表达式的一部分来读（re.match(rf"(^|.*\\.){name}($|\\..*)", module)），而这个名字不是合法的正则表达式：${error}`],
  [/^repeats a group that repeats inside, as \(\.\*\)\* does: PEFT reads each name as part of a regular expression, and this one can take exponential time to match$/,
    () => '重复了一个内部也在重复的分组（如 (.*)*）：PEFT 把每个名字当作正则表达式的一部分来读，这样的名字匹配起来可能需要指数级的时间'],
  [/^DoRA on GPT-2's Conv1D layers is not simulated yet: PEFT 0\.21's transpose\(weight, fan_in_fan_out\) wraps an fp32 base weight in a new nn\.Parameter at every forward, whose cast autocast caches and whose gradient PyTorch computes \(measured on the H100\), and transposes a bf16 or fp16 one as a view; plan LoRA without DoRA here$/,
    () => '暂不支持模拟 GPT-2 Conv1D 层上的 DoRA：PEFT 0.21 的 transpose(weight, fan_in_fan_out) 在每次前向时把 fp32 的基础权重包成一个新的 nn.Parameter，autocast 会缓存它的类型转换，PyTorch 还会为它计算梯度（已在 H100 上实测）；bf16 或 fp16 的权重则转置成一个视图；这里请规划不带 DoRA 的 LoRA'],
  [/^with modules_to_save naming (.+), PEFT 0\.21 ties (.+) to a copy of (\S+), which memplan does not simulate on a masked LM; leave ensure_weight_tying out$/,
    (names, tied, embedding) => `modules_to_save 指定了 ${names}，PEFT 0.21 会把 ${tied} 绑定到 ${embedding} 的副本上，memplan 暂不模拟掩码语言模型的这种情况；请去掉 ensure_weight_tying`],
  [/^with target_modules taking embed_tokens or lm_head on a model whose lm_head is tied to its input embedding, PEFT 0\.21 ties LoRA adapters on the input embedding \(lora\.Embedding\), which memplan does not simulate; leave ensure_weight_tying out$/,
    () => '这个模型的 lm_head 与输入嵌入层共享权重，而 target_modules 选中了 embed_tokens 或 lm_head：PEFT 0.21 会把 LoRA 适配器绑定加在输入嵌入层上（lora.Embedding），memplan 暂不模拟；请去掉 ensure_weight_tying'],
  [/^every module target_modules (name|match) is kept whole by modules_to_save, and gets no adapter: PEFT 0\.21 raises (".*"); name other modules to adapt$/,
    (_verb, error) => `target_modules 选中的每个模块都被 modules_to_save 整体训练，没有模块会加上适配器：PEFT 0.21 会报错 ${error}；请指定其他要加适配器的模块`],
  [/^in a list, (".*?") names a module of that name: for every linear layer, write the string itself \("target_modules": "all-linear"\)$/,
    (name) => `在列表中，${name} 只会匹配同名的模块：要给所有线性层加 LoRA，请直接写字符串（"target_modules": "all-linear"）`],
  [/^is not "all-linear", and not a regular expression memplan can read: (".*")$/s, (error) => `既不是 "all-linear"，也不是 memplan 能读懂的正则表达式：${error}`],
  [/^the pattern (".*") matches no parameter \(names as model\.named_parameters\(\) gives them, e\.g\. (".*")\)$/s,
    (pattern, example) => `模式 ${pattern} 没有匹配到任何参数（参数名以 model.named_parameters() 给出的为准，例如 ${example}）`],
  [/^(this pattern freezes|these patterns freeze) (every parameter|every LoRA adapter \(with LoRA the adapters are all that trains\)): nothing would train \(loss\.backward\(\) raises ("[^"]*")\)$/,
    (who, what, error) =>
      `${who === 'this pattern freezes' ? '该模式' : '这些模式'}冻结了${what === 'every parameter' ? '所有参数' : '所有 LoRA 适配器（使用 LoRA 时只训练适配器）'}：没有可训练的参数（loss.backward() 会报错 ${error}）`],
  [/^(\d+) is more than the model's (\d+) positions$/, (a, b) => `${a} 超过了模型的最大位置数 ${b}`],

  // A config.json (engine/models/hf/config.ts)
  [exactly('quantized weights (bitsandbytes 4-bit or 8-bit, GPTQ, AWQ, fp8) are not modelled: memplan simulates fp32, bf16 and fp16 weights; remove quantization_config to plan the unquantized model'),
    () => '量化权重（bitsandbytes 4-bit 或 8-bit、GPTQ、AWQ、fp8）尚未建模：memplan 只模拟 fp32、bf16 和 fp16 权重；请删除 quantization_config，按未量化的模型来规划'],
  [exactly('"gemma3" is Gemma3ForConditionalGeneration (text and vision), which transformers does not train from input_ids and labels alone (it requires token_type_ids) and which is not simulated: paste its text_config, with "model_type": "gemma3_text", to plan Gemma3ForCausalLM (the text model alone)'),
    () => '"gemma3" 是 Gemma3ForConditionalGeneration（文本加视觉），transformers 不能只用 input_ids 和 labels 训练它（它需要 token_type_ids），memplan 也不模拟它：请粘贴它的 text_config，并设置 "model_type": "gemma3_text"，以规划 Gemma3ForCausalLM（仅文本模型）'],
  [exactly('bidirectional Gemma 3 (EmbeddingGemma) is not simulated: memplan trains the causal language model'), () => '暂不支持模拟双向注意力的 Gemma 3（EmbeddingGemma）：memplan 训练的是因果语言模型'],
  [/^must be a list of class names$/, () => '必须是类名的列表'],
  [/^(".*") is not simulated yet; memplan trains (.+) for this model_type$/, (name, classes) => `暂不支持模拟 ${name}；对于此 model_type，memplan 训练的是 ${orNames(classes)}`],
  [/^(".*") is the bare model: it returns hidden states and no loss, and the Trainer raises ("[^"]*"); plan (\S+) instead: set architectures to (\[".*"\]), or leave architectures out$/,
    (name, error, instead, list) => `${name} 是不带任何头的裸模型：它只返回隐藏状态，不返回损失，Trainer 会报错 ${error}；请改为规划 ${instead}：把 architectures 设为 ${list}，或不写 architectures`],
  [/^(".*") returns no loss from input_ids and labels alone: it adds its next-sentence loss to the masked-LM loss only when next_sentence_label is given too \(else its loss is None\), and the Trainer raises ("[^"]*"); plan (\S+) instead \(the same encoder and masked-LM head, without the pooler and the next-sentence classifier\): set architectures to (\[".*"\]), or leave architectures out$/,
    (name, error, instead, list) =>
      `只给 input_ids 和 labels 时 ${name} 不返回损失：只有同时给出 next_sentence_label，它才把下一句预测损失加到掩码语言模型损失上（否则 loss 为 None），Trainer 会报错 ${error}；请改为规划 ${instead}（同样的编码器和掩码语言模型头，只是没有 pooler 和下一句预测分类器）：把 architectures 设为 ${list}，或不写 architectures`],
  [/^must be one of (.+) \(or null\), got (.+)$/, (names, value) => `必须是以下之一：${names}（或 null），实际为 ${given(value)}`],
  [/^a regression head \(MSELoss\) on a (\w+) model fails in PyTorch: mse_loss's backward meets the float32 labels and throws ("[^"]*"); train in (\w+) or fp32, or cast the labels to (\w+) in your own loop$/,
    (dtype, error, amp, cast) => `${dtype} 模型上的回归头（MSELoss）在 PyTorch 中会报错：mse_loss 的反向传播遇到 float32 标签，报错 ${error}；请改用 ${amp} 或 fp32 训练，或在自己的训练循环里把标签转成 ${cast}`],
  [exactly('names no class: a classifier needs at least one'), () => '没有列出任何类别：分类器至少需要一个类别'],
  [new RegExp(`^must be a token id \\(a non-negative integer\\)${GOT}`), (g) => `必须是 token id（非负整数）${got(g)}`],
  [/^without pad_token_id, (\S+ForSequenceClassification) trains one sequence a batch: it finds each sequence's last token by its padding token, and at batch (\d+) transformers raises ("[^"]*"); set pad_token_id \(the Trainer recipes set model\.config\.pad_token_id to the tokenizer's\)$/,
    (cls, batch, error) => `没有 pad_token_id 时，${cls} 每个批次只能训练一条序列：它靠填充 token 找到每个序列的最后一个 token，批次大小为 ${batch} 时 transformers 会报错 ${error}；请设置 pad_token_id（Trainer 的常见做法是把 model.config.pad_token_id 设为分词器的 pad token）`],
  [/^must be more than pad_token_id \+ 1 \((\d+)\): RoBERTa's position ids start there$/, (n) => `必须大于 pad_token_id + 1（${n}）：RoBERTa 的位置编号从这里开始`],
  [/^the activation (.+) is not simulated yet; simulated: (.+)$/, (name, names) => `暂不支持模拟激活函数 ${name}；目前支持：${names}`],
  [new RegExp(`^must be a number in \\(0, 1\\]${GOT}`), (g) => `必须是 (0, 1] 区间内的数${got(g)}`],
  [/^turns (\d+) dimensions of each head; the rotary embedding needs an even number$/, (n) => `会旋转每个头的 ${n} 个维度；旋转位置编码（RoPE）需要偶数个维度`],
  [/^must divide (\S+) \((\d+)\)$/, (k, n) => `必须能整除 ${k}（${n}）`],
  [/^must be divisible by (\S+) \((\d+)\)$/, (k, n) => `必须能被 ${k}（${n}）整除`],
  [/^must be at least num_attention_heads \((\d+)\), or give head_dim: hidden_size \/\/ num_attention_heads is 0$/,
    (n) => `必须至少为 num_attention_heads（${n}），否则请给出 head_dim：hidden_size // num_attention_heads 为 0`],
  [new RegExp(`^must be even: the rotary embedding turns pairs of dimensions${GOT}`), (g) => `必须是偶数：旋转位置编码按维度两两旋转${got(g)}`],
  [/^must list "sliding_attention" or "full_attention" for each of the (\d+) layers$/, (n) => `必须为 ${n} 层中的每一层列出 "sliding_attention" 或 "full_attention"`],
  [/^the router load-balancing loss \(output_router_logits: true\) is not simulated yet: memplan trains (\w+) with its default false, the loss of the language model alone$/,
    (model) => `暂不支持模拟路由负载均衡损失（output_router_logits: true）：memplan 按默认值 false 训练 ${model}，只计算语言模型本身的损失`],
  [new RegExp(`^must be a number of at least (\\S+?)${GOT}`), (n, g) => `必须是大于或等于 ${n} 的数${got(g)}`],
  [/^router jitter noise \((.+)\) is not simulated yet: the published Mixtral models train with 0$/, (v) => `暂不支持模拟路由抖动噪声（${v}）：已发布的 Mixtral 模型训练时该值为 0`],
  [/^(.+) is not simulated yet: memplan simulates transformers' default, "grouped_mm" \(remove the key to plan it\)$/,
    (v) => `暂不支持模拟 ${v}：memplan 模拟的是 transformers 默认的专家实现 "grouped_mm"（删除该键即可按它规划）`],
  [new RegExp(`^must be at most (\\S+) \\((\\d+)\\)${GOT}`), (k, n, g) => `不能超过 ${k}（${n}）${got(g)}`],
  [new RegExp(`^must be a list of layer indices${GOT}`), (g) => `必须是层序号的列表${got(g)}`],
  [new RegExp(`^must be a list of 0 \\(no rotary embedding\\) and 1, at least one per layer \\((\\d+)\\)${GOT}`), (n, g) => `必须是由 0（该层不用旋转位置编码）和 1 组成的列表，每层至少一个（共 ${n} 层）${got(g)}`],
  [exactly("the sliding window of SmolLM3's NoPE layers is not simulated yet: the published model has none (use_sliding_window false)"), () => '暂不支持模拟 SmolLM3 无位置编码（NoPE）层的滑动窗口：已发布的模型未启用（use_sliding_window 为 false）'],
  [exactly("the sliding window of SmolLM3's sliding_attention layers is not simulated yet: the published model has none"), () => '暂不支持模拟 SmolLM3 中 sliding_attention 层的滑动窗口：已发布的模型没有这种层'],
  [new RegExp(`^must be a probability between 0 and 1${GOT}`), (g) => `必须是 0 到 1 之间的概率${got(g)}`],
  [new RegExp(`^must be true or false${GOT}`), (g) => `必须是 true 或 false${got(g)}`],
  [new RegExp(`^must be a positive number or null${GOT}`), (g) => `必须是正数或 null${got(g)}`],
  [/^(".*") is not simulated yet; simulated: (.+)$/, (name, names) => `暂不支持模拟 ${name}；目前支持：${names}`],

  // Sliding-window attention (engine/models/hf/attention.ts, engine/models/hf/llama.ts)
  [/^reaches the sliding window: SDPA then gets a mask, and a masked (\S+) kernel in (\S+) is not simulated yet \(memplan simulates a masked cuDNN attention, and the memory-efficient kernel in half types\): train in (.+), or use a seq_len below the window$/,
    (kernel, dtype, advice) =>
      `达到了滑动窗口：此时 SDPA 会收到掩码，而 ${dtype} 下带掩码的 ${kernel} 内核暂不支持模拟（memplan 能模拟带掩码的 cuDNN 注意力，以及半精度下的 memory-efficient 内核）：请改用 ${listed(advice)} 训练，或使用小于窗口的 seq_len`],
  [/^eager sliding-window attention \(window (\d+)\) at seq_len (\d+) is not simulated yet: use attention "sdpa" or a seq_len below the window$/,
    (window, seqLen) => `暂不支持模拟 seq_len 为 ${seqLen} 时的 eager 滑动窗口注意力（窗口 ${window}）：请使用 attention "sdpa"，或小于窗口的 seq_len`],

  // Plans too large to simulate (engine/plan/limits.ts)
  [new RegExp(`^${TOO_LARGE}(.+) micro-steps per optimizer step; the limit is ([\\d,]+)${PEAK_AFTER_TWO}$`),
    (n, limit) => `${tooLarge}每个优化器步 ${amount(n)} 个微步（梯度累积）；上限为 ${limit}${peakAfterTwo}`],
  [new RegExp(`^${TOO_LARGE}(.+) (layers|blocks); the limit is ([\\d,]+) \\(the model is built and its graph held in memory\\)$`),
    (n, what, limit) => `${tooLarge}${amount(n)} ${layersWord(what)}；上限为 ${limit}（模拟时要构建整个模型，并把它的计算图保存在内存中）`],
  [new RegExp(`^${TOO_LARGE}one micro-step of (.+) (layers|blocks) makes about (.+) allocator events; the limit is ([\\d,]+) \\(its autograd graph is held in memory\\)$`),
    (n, what, events, limit) => `${tooLarge}${amount(n)} ${layersWord(what)}的一个微步约产生 ${amount(events)} 次分配器事件；上限为 ${limit}（它的自动求导计算图要保存在内存中）`],
  [new RegExp(`^${TOO_LARGE}(.+) parameters; the limit is ([\\d,]+) \\(10\\^13\\), where every byte count stays exact$`),
    (n, limit) => `${tooLarge}${amount(n)} 个参数；上限为 ${limit}（10^13），在此范围内所有字节数都保持精确`],
  [new RegExp(`^${TOO_LARGE}(\\S+) (.+?) makes one block alone hold (.+?) parameters \\((.+?) of them in its (attention|MLP|experts)\\); the limit is ([\\d,]+) \\(10\\^13\\) for the whole model, where every byte count stays exact$`),
    (field, value, block, piece, where, limit) =>
      `${tooLarge}${field} 为 ${amount(value)}，仅一个块就有 ${amount(block)} 个参数（其中 ${amount(piece)} 个在它的${BLOCK_PIECES[where] ?? where}中）；整个模型的上限为 ${limit}（10^13），在此范围内所有字节数都保持精确`],
  [new RegExp(`^${TOO_LARGE}(.+) parameter and buffer tensors; the limit is ([\\d,]+)$`), (n, limit) => `${tooLarge}${amount(n)} 个参数和缓冲区张量；上限为 ${limit}`],
  [new RegExp(`^${TOO_LARGE}(\\d+) steps x (.+) micro-steps? x about (.+) allocator events each = about (.+) events; the limit is ([\\d,]+) \\(about (\\d+) s\\)(${PEAK_AFTER_TWO})?$`),
    (steps, micro, each, total, limit, seconds, peak) =>
      `${tooLarge}${steps} 步 × ${amount(micro)} 个微步 × 每个微步约 ${amount(each)} 次分配器事件 = 约 ${amount(total)} 次事件；上限为 ${limit}（约 ${seconds} 秒）${peak ? peakAfterTwo : ''}`],
  [new RegExp(`^${TOO_LARGE}a cap of (\\d+) bytes \\((.+)\\); the limit is (.+) \\((.+) bytes\\), where every byte count stays an exact integer$`),
    (n, size, limit, power) => `${tooLarge}显存上限 ${n} 字节（${size.replace(/ bytes$/, ' 字节')}）；最大为 ${limit}（${power} 字节），在此范围内所有字节数都保持为精确整数`],
  [/^(\d+) bytes is less than the smallest segment PyTorch's allocator reserves \((.+)\), so every allocation would run out of memory; the cap is in bytes(?:: did you mean (.+)\?)?$/,
    (n, segment, meant) =>
      `${n} 字节小于 PyTorch 分配器预留的最小段（${segment}），每次分配都会显存不足；显存上限的单位是字节${meant ? `：是否想写 ${meant.replace(/ \((\d+)\)/g, '（$1）').replace(/ or /g, ' 或 ').replace(/） 或 /g, '）或 ')}？` : ''}`],
  [/^no layer has parameters, so there is nothing to train: loss\.backward\(\) would raise ("[^"]*") \(add a (.+) layer\)$/,
    (error, types) => `没有任何层带参数，因此没有可训练的内容：loss.backward() 会报错 ${error}（请添加 ${listed(types)} 层）`],

  // A layer list (engine/models/layer-list.ts, torchvision.ts, vit.ts)
  [/^the layer type (".*") is not simulated yet; simulated: (.+)$/, (type, types) => `暂不支持模拟层类型 ${type}；目前支持：${types}`],
  [/^a linear layer of (\d+) input features gets (\d+)$/, (n, m) => `该 linear 层的输入特征数为 ${n}，但收到的是 ${m}`],
  [/^a self_attention layer of embed_dim (\d+) gets (\d+) features$/, (n, m) => `该 self_attention 层的 embed_dim 为 ${n}，但收到 ${m} 个特征`],
  [/^embed_dim (\d+) is not divisible by num_heads (\d+)$/, (n, h) => `embed_dim ${n} 不能被 num_heads ${h} 整除`],
  [/^a (\w+) of (\d+) features gets (\d+)$/, (type, n, m) => `该 ${type} 有 ${n} 个特征，但收到的是 ${m}`],
  [/^(\w+) needs (\[.*\]) per sample, gets (\[.*\])$/, (type, wanted, shape) => `${type} 要求每个样本的形状为 ${wanted}，实际为 ${shape}`],
  [/^(\w+) needs (\[.*\]), gets (\[.*\])$/, (type, wanted, shape) => `${type} 要求形状为 ${wanted}，实际为 ${shape}`],
  [/^batch_norm2d of (\d+) channels gets (\[.*\])$/, (n, shape) => `该 batch_norm2d 有 ${n} 个通道，但收到的形状为 ${shape}`],
  [exactly('conv2d is simulated for square images (height = width)'), () => 'conv2d 只支持模拟方形图像（height = width）'],
  [exactly('the image is smaller than the kernel'), () => '图像比卷积核还小'],
  [exactly('adaptive_avg_pool2d is simulated for output_size 1 (global average pooling)'), () => 'adaptive_avg_pool2d 只支持模拟 output_size 1（全局平均池化）'],
  [/^a residual body must keep the shape (\[.*\]), it makes (\[.*\])$/, (wanted, shape) => `residual 的主体必须保持形状 ${wanted}，实际得到 ${shape}`],
  [exactly('an embedding layer can only come first (it takes token ids)'), () => 'embedding 层只能放在第一层（它的输入是 token id）'],
  [/^(".*") is not simulated yet$/, (name) => `暂不支持模拟 ${name}`],
  [/^must be a multiple of the patch size (\d+) for (\S+)$/, (n, name) => `必须是 ${name} 的 patch 大小 ${n} 的倍数`],

  // The GPU and the allocator settings (engine/gpu/catalog.ts, engine/allocator/config.ts)
  [new RegExp(`^unknown GPU (".*?"); known: (.+?)${DID_YOU_MEAN}`), (name, known, c) => `未知的 GPU ${name}；已知的 GPU：${known}${didYouMean(c)}`],
  [/^unknown allocator setting (".*") \(PyTorch 2\.11 refuses it too\)$/, (key) => `未知的分配器设置 ${key}（PyTorch 2.11 同样会拒绝）`],
  [
    exactly("cudaMallocAsync replaces PyTorch's caching allocator with CUDA's stream-ordered allocator (no blocks, segments or rounding): memplan simulates the caching allocator (backend:native) only"),
    () => 'cudaMallocAsync 会用 CUDA 的流序分配器取代 PyTorch 的缓存分配器（没有块、段和取整）：memplan 只模拟缓存分配器（backend:native）',
  ],
  [/^unknown allocator backend (".*"): PyTorch's options are native and cudaMallocAsync$/, (name) => `未知的分配器后端 ${name}：PyTorch 的可选值是 native 和 cudaMallocAsync`],
  [
    /^caps the memory PyTorch may use at (\S+) of the GPU's, as torch\.cuda\.set_per_process_memory_fraction does: give the cap to memplan as the plan's gpu\.memory_limit_bytes \(the CLI's --memory-fraction (\S+)\) instead$/,
    (f, g) => `它把 PyTorch 可用的显存限制为 GPU 显存的 ${f}，与 torch.cuda.set_per_process_memory_fraction 的作用相同：请改用方案的 gpu.memory_limit_bytes（命令行的 --memory-fraction ${g}）把这个上限告诉 memplan`,
  ],
  [new RegExp(`^must be in \\[0\\.0, 1\\.0\\]${GOT}`), (g) => `必须在 [0.0, 1.0] 之间${got(g)}`],
  [/^the divisions must be a power of 2, got (.+)$/, (g) => `划分数必须是 2 的幂，实际为 ${g}`],
  [new RegExp(`^must be a power of 2 up to 128${GOT}`), (g) => `必须是不超过 128 的 2 的幂${got(g)}`],
  [/^expected a list like (\S+), got (.+)$/, (example, g) => `应为形如 ${example} 的列表，实际为 ${g}`],
  [/^expected entries SIZE_MB:DIVISIONS, got (.+)$/, (g) => `每一项应为 SIZE_MB:DIVISIONS 的形式，实际为 ${g}`],
  [/^expected key:value, got (.+)$/, (g) => `应为 key:value 的形式，实际为 ${g}`],
  [/^expected True or False \(capitalized, as PyTorch reads them\), got (.+)$/, (g) => `应为 True 或 False（首字母大写，PyTorch 只认这种写法），实际为 ${g}`],
  [/^each division must be 0 or a power of 2, got (.+)$/, (g) => `每个划分数必须是 0 或 2 的幂，实际为 ${g}`],
  [/^each size must be a power of 2 in MB, got (.+)$/, (g) => `每个大小必须是 2 的幂（以 MB 为单位），实际为 ${g}`],
  [/^sizes must increase$/, () => '各个大小必须递增'],
  [new RegExp(`^must be at least (\\S+) \\(MB\\)${GOT}`), (n, g) => `必须至少为 ${n}（MB）${got(g)}`],
  [new RegExp(`^must be between (\\S+) and (\\S+) \\(exclusive\\)${GOT}`), (a, b, g) => `必须在 ${a} 和 ${b} 之间（不含两端）${got(g)}`],
  [new RegExp(`^must be at least (\\S+) \\(MB\\) when large_segment_size_mb is (\\S+?)${GOT}`), (n, m, g) => `large_segment_size_mb 为 ${m} 时必须至少为 ${n}（MB）${got(g)}`],
  [new RegExp(`^must be more than (\\S+) \\(MB\\)${GOT}`), (n, g) => `必须大于 ${n}（MB）${got(g)}`],
  [/^large_segment_size_mb (\d+) with expandable_segments:True fails in PyTorch: the large pool maps pages of (\d+) MiB, and cuMemCreate takes only multiples of the GPU's 2 MiB page, so the first request above 1 MiB raises a CUDA driver error; give an even large_segment_size_mb, or leave expandable segments off$/,
    (n, m) => `large_segment_size_mb ${n} 与 expandable_segments:True 一起使用时 PyTorch 会报错：大块池按 ${m} MiB 的页映射显存，而 cuMemCreate 只接受 GPU 2 MiB 页的整数倍，因此第一个大于 1 MiB 的申请会引发 CUDA 驱动错误；请把 large_segment_size_mb 设为偶数，或不启用可扩展段`],
];

export function localizeIssue(message: string, m: Messages, locale: Locale): string {
  if (message === 'local:hf_empty') return m.hfEmpty;
  if (message.startsWith('local:hf_json:')) return m.hfNotJson(message.slice('local:hf_json:'.length));
  if (message === 'local:shape') return m.inputShapeInvalid;
  if (locale === 'zh-CN') {
    for (const [pattern, word] of ZH_PATTERNS) {
      const match = pattern.exec(message);
      if (match) return word(...match.slice(1).map((g) => g ?? ''));
    }
  }
  return message;
}

/** A field path and what is wrong there, as an InputError's message puts them (`training.seq_len: ...`). */
const AT_FIELD = /^([a-z_][a-z0-9_]*(?:\.[a-z0-9_]+)+): ([\s\S]*)$/;

/**
 * An engine error's message as it crossed as text (an advice change or a compared change the engine could not
 * simulate): `localizeIssue` on what is wrong, the field path kept as it is.
 */
export function localizeEngineMessage(message: string, m: Messages, locale: Locale): string {
  const match = AT_FIELD.exec(message);
  return match ? `${match[1]}: ${localizeIssue(match[2]!, m, locale)}` : localizeIssue(message, m, locale);
}
