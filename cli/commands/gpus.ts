/** `memplan gpus`: the GPU catalog (resources/gpus.json): ids to use in plans and on the command line. */
import { formatSize } from '../../engine/allocator/format.ts';
import { memoryAvailableToPyTorch } from '../../engine/gpu/catalog.ts';
import { parseCommandArgs } from '../args.ts';
import { gpuCatalog } from '../gpus.ts';

const usage = `Usage: memplan gpus [--json]

Lists the GPUs memplan knows: the id to use as gpu.name (or --gpu), the name torch.cuda.get_device_name()
prints, the memory PyTorch sees, and how much of it the allocator can use (less the CUDA context).`;

function run(args: string[]): void {
  const { values } = parseCommandArgs('gpus', args, { json: { type: 'boolean', default: false } });
  const gpus = gpuCatalog().gpus;
  if (values.json) {
    process.stdout.write(
      JSON.stringify(
        gpus.map((g) => ({
          id: g.id,
          name: g.name,
          total_memory_bytes: g.total_memory_bytes,
          available_to_pytorch_bytes: memoryAvailableToPyTorch(g),
          total_memory_source: g.total_memory_source.kind,
        })),
      ) + '\n',
    );
    return;
  }
  const lines = gpus.map(
    (g) =>
      `${g.id.padEnd(16)} ${g.name.padEnd(28)} ${formatSize(g.total_memory_bytes).padStart(10)}  usable ${formatSize(memoryAvailableToPyTorch(g)).padStart(10)}  (${g.total_memory_source.kind})`,
  );
  process.stdout.write([`${'id'.padEnd(16)} ${'torch.cuda.get_device_name()'.padEnd(28)} ${'memory'.padStart(10)}`, ...lines].join('\n') + '\n');
}

export const gpusCommand = { summary: 'list the GPUs of the catalog', usage, run };
