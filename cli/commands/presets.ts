/** `memplan presets`: the model presets a plan can name as `{"preset": "..."}`. */
import { PRESETS, RESULT_SCHEMA_VERSION, type PresetList } from '../../engine/index.ts';
import { parseCommandArgs } from '../args.ts';

const usage = `Usage: memplan presets [--json]

Lists the model presets: use one in a plan as "model": {"preset": "llama-3-8b"}. Hugging Face presets are the
models' published config.json; torchvision presets are torchvision.models' constructors.
--json prints one JSON object: {"kind": "presets", "presets": [...]}.`;

function run(args: string[]): void {
  const { values } = parseCommandArgs('presets', args, { json: { type: 'boolean', default: false } });
  const rows = Object.entries(PRESETS).map(([id, p]) => ({
    id,
    family: p.family,
    parameters: p.parameters,
    source: p.kind === 'hf' ? `huggingface.co/${p.source}` : `torchvision.models.${p.name}`,
  }));
  if (values.json) {
    const list: PresetList = { schema_version: RESULT_SCHEMA_VERSION, kind: 'presets', presets: rows };
    process.stdout.write(JSON.stringify(list) + '\n');
    return;
  }
  // columns as wide as their longest entry
  const idWidth = Math.max('id'.length, ...rows.map((r) => r.id.length));
  const familyWidth = Math.max('family'.length, ...rows.map((r) => r.family.length));
  const lines = rows.map((r) => `${r.id.padEnd(idWidth)} ${r.family.padEnd(familyWidth)} ${r.parameters.padStart(6)}  ${r.source}`);
  process.stdout.write([`${'id'.padEnd(idWidth)} ${'family'.padEnd(familyWidth)} ${'params'.padStart(6)}  source`, ...lines].join('\n') + '\n');
}

export const presetsCommand = { summary: 'list the model presets', usage, run };
