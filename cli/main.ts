/**
 * The `memplan` command: the same engine as the app, from a terminal (started by cli/memplan.ts).
 * Exit codes: 0 success, 2 bad input (one line naming what is wrong, no stack trace), 1 an internal error.
 */
import packageJson from '../package.json' with { type: 'json' };
import { InputError } from '../engine/index.ts';
import { replayCommand } from './commands/replay.ts';
import { simulateCommand } from './commands/simulate.ts';
import { maxBatchCommand } from './commands/max-batch.ts';
import { gpusCommand } from './commands/gpus.ts';
import { presetsCommand } from './commands/presets.ts';

interface Command {
  summary: string;
  usage: string;
  run(args: string[]): Promise<void> | void;
}

const COMMANDS: Record<string, Command> = {
  simulate: simulateCommand,
  'max-batch': maxBatchCommand,
  gpus: gpusCommand,
  presets: presetsCommand,
  replay: replayCommand,
};

function help(): string {
  const lines = [
    'memplan: predicts the GPU memory of a PyTorch training run by simulating PyTorch\'s allocator.',
    '',
    'Usage: memplan <command> [options]',
    '',
    'Commands:',
    ...Object.entries(COMMANDS).map(([name, c]) => `  ${name.padEnd(10)} ${c.summary}`),
    '',
    'Run `memplan <command> --help` for a command\'s options. `--json` prints one JSON object.',
  ];
  return lines.join('\n');
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(help() + '\n');
    return 0;
  }
  if (name === '--version' || name === '-v') {
    process.stdout.write(packageJson.version + '\n');
    return 0;
  }
  const command = COMMANDS[name];
  if (!command) throw new InputError('', `unknown command "${name}"; expected one of: ${Object.keys(COMMANDS).join(', ')}`);
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.usage + '\n');
    return 0;
  }
  await command.run(rest);
  return 0;
}

// `memplan ... | head`: the reader has what it wanted and closed the pipe. Stop quietly, as a command killed by
// SIGPIPE does, instead of Node's unhandled 'error' event with its stack.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code === 'EPIPE') process.exit(process.exitCode ?? 0);
  throw error;
});

try {
  process.exitCode = await main(process.argv.slice(2));
} catch (error) {
  if (error instanceof InputError) {
    // one line per problem (a plan can have several)
    process.stderr.write(error.message.split('\n').map((line) => `memplan: ${line}\n`).join(''));
    process.exitCode = 2;
  } else {
    // the stack only when asked for (MEMPLAN_DEBUG=1): a user sees one line and what to do
    const debug = process.env['MEMPLAN_DEBUG'] === '1' && error instanceof Error;
    process.stderr.write(`memplan: internal error: ${debug ? error.stack ?? error.message : error instanceof Error ? error.message : String(error)}\n`);
    process.stderr.write('This is a bug in memplan; please report it with the command you ran (MEMPLAN_DEBUG=1 prints where it happened).\n');
    process.exitCode = 1;
  }
}
