/**
 * A problem's message in the interface's language. The shell's own checks use message codes (`local:...`); the
 * engine's schema messages are English sentences of a few fixed shapes, worded again here for Chinese. A message
 * of another shape is shown as the engine wrote it.
 */
import type { Messages } from './index.ts';
import type { Locale } from './types.ts';

const ZH_PATTERNS: [RegExp, (...groups: string[]) => string][] = [
  [/^must be a positive integer$/, () => '必须是正整数'],
  [/^must be a whole number$/, () => '必须是整数'],
  [/^must be zero or more$/, () => '必须大于或等于 0'],
  [/^is required \((.+)\)$/, (t) => `必填（${t}）`],
  [/^is required$/, () => '必填'],
  [/^expected (number|string|boolean|array|object|int)$/, (t) => `应为 ${t}`],
  [/^expected one of (.+)$/, (v) => `应为以下之一：${v}`],
  [/^unknown keys? (.+)$/, (k) => `未知的键 ${k}`],
  [/^does not match any accepted form$/, () => '不符合任何可接受的形式'],
  [/^must be a positive integer, got (.+)$/, (g) => `必须是正整数，实际为 ${g}`],
  [/^must be divisible by (\S+) \((\d+)\)$/, (k, n) => `必须能被 ${k}（${n}）整除`],
  [/^(\d+) is more than the model's (\d+) positions$/, (a, b) => `${a} 超过了模型的 ${b} 个位置`],
];

export function localizeIssue(message: string, m: Messages, locale: Locale): string {
  if (message === 'local:hf_empty') return m.hfEmpty;
  if (message.startsWith('local:hf_json:')) return m.hfNotJson(message.slice('local:hf_json:'.length));
  if (message === 'local:shape') return m.inputShapeInvalid;
  if (locale === 'zh-CN') {
    for (const [pattern, word] of ZH_PATTERNS) {
      const match = pattern.exec(message);
      if (match) return word(...match.slice(1));
    }
  }
  return message;
}
