/** `memplan gpus`: the GPU catalog (resources/gpus.json): ids to use in plans and on the command line. */
import { DEFAULT_GPU, RESULT_SCHEMA_VERSION, formatSize, memoryAvailableToPyTorch, type GpuList } from '../../engine/index.ts';
import { parseCommandArgs } from '../args.ts';
import { gpuCatalog } from '../gpus.ts';

const usage = `Usage: memplan gpus [--json]

Lists the GPUs memplan knows: the id to use as gpu.name (or --gpu), the name torch.cuda.get_device_name()
prints, the memory PyTorch sees, and how much of it the allocator can use (less the CUDA context and library
handles).
--json prints one JSON object: {"kind": "gpus", "default_gpu": ..., "gpus": [...]}.`;

function run(args: string[]): void {
  const { values } = parseCommandArgs('gpus', args, { json: { type: 'boolean', default: false } });
  const gpus = gpuCatalog().gpus;
  if (values.json) {
    const list: GpuList = {
      schema_version: RESULT_SCHEMA_VERSION,
      kind: 'gpus',
      default_gpu: DEFAULT_GPU,
      gpus: gpus.map((g) => ({
        id: g.id,
        name: g.name,
        aliases: g.aliases,
        vendor: g.vendor,
        total_memory_bytes: g.total_memory_bytes,
        available_to_pytorch_bytes: memoryAvailableToPyTorch(g),
        total_memory_source: g.total_memory_source.kind,
        non_pytorch_source: g.non_pytorch_source.kind,
      })),
    };
    process.stdout.write(JSON.stringify(list) + '\n');
    return;
  }
  const lines = gpus.map(
    (g) =>
      `${g.id.padEnd(16)} ${g.name.padEnd(28)} ${formatSize(g.total_memory_bytes).padStart(10)}  usable ${formatSize(memoryAvailableToPyTorch(g)).padStart(10)}  (memory ${g.total_memory_source.kind}, context ${g.non_pytorch_source.kind})`,
  );
  process.stdout.write([`${'id'.padEnd(16)} ${'torch.cuda.get_device_name()'.padEnd(28)} ${'memory'.padStart(10)}`, ...lines].join('\n') + '\n');
}

export const gpusCommand = { summary: 'list the GPUs of the catalog', usage, run };
