/**
 * Every message catalogue of the interface (renderer/src/i18n/index.ts merges the areas): the same keys in English
 * and Chinese, each of the same kind and arity, and the Chinese ones in Chinese. The types already refuse a missing
 * key at compile time; this test also catches what a cast or a spread lets through.
 */
import { describe, expect, it } from 'vitest';
import { catalogues } from '../../renderer/src/i18n/index.ts';

/** Messages that are names, the same in both languages: of files, libraries, vendors, PyTorch's and transformers' own
 * settings (`fused=True`, `attn_implementation="eager"`, `expandable_segments`) as a user types them. */
const NAMES = new Set([
  'modeHf', 'modeTorchvision', 'hfConfig', 'blockResidual', 'optimizerSgd', 'optimizerAdam', 'optimizerAdamw',
  'implFused', 'attentionEager', 'attentionSdpa', 'gpuSource', 'expandableSegments', 'vendorNvidia', 'vendorAmd', 'appName',
  'allocConf', 'rNvidiaSmi', 'loraAlpha', 'loraDropout', 'loraTargets', 'loraSaved', 'loraTieWeights', 'loraDora',
]);

const sampleArgs = (n: number) => Array.from({ length: n }, (_, i) => (i % 2 === 0 ? 1 : 'x'));
/** A message function's text for sample arguments (numbers and text); undefined where those do not fit it. */
function sample(fn: (...a: unknown[]) => unknown): string | undefined {
  try {
    const text = fn(...sampleArgs(fn.length));
    return typeof text === 'string' ? text : undefined;
  } catch {
    return undefined;
  }
}

describe('the interface catalogues', () => {
  const en = catalogues.en as unknown as Record<string, unknown>;
  const zh = catalogues['zh-CN'] as unknown as Record<string, unknown>;

  it('have the same keys in English and Chinese', () => {
    const onlyEn = Object.keys(en).filter((k) => !(k in zh));
    const onlyZh = Object.keys(zh).filter((k) => !(k in en));
    console.log(`${Object.keys(en).length} messages in each language`);
    expect({ onlyEn, onlyZh }).toEqual({ onlyEn: [], onlyZh: [] });
  });

  it('give each key the same kind and arity in both', () => {
    const differ = Object.keys(en).filter((k) => {
      const a = en[k];
      const b = zh[k];
      if (typeof a !== typeof b) return true;
      return typeof a === 'function' && (a as () => string).length !== (b as () => string).length;
    });
    expect(differ).toEqual([]);
  });

  it('are Chinese in Chinese', () => {
    const untranslated = Object.entries(zh).filter(([key, value]) => {
      const text = typeof value === 'function' ? sample(value as (...a: unknown[]) => unknown) : value;
      // A function whose parameters are not plain numbers or text (an enum, an object) cannot be sampled here.
      if (typeof text !== 'string' || text.includes('undefined') || NAMES.has(key) || !/[A-Za-z]/.test(text)) return false;
      return !/[\u3000-\u9fff\uff00-\uffef]/.test(text) && text === (typeof en[key] === 'function' ? sample(en[key] as (...a: unknown[]) => unknown) : en[key]);
    });
    expect(untranslated.map(([k]) => k)).toEqual([]);
  });
});
