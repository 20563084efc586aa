// `npx sparkform <command>`: the project's own CLI. One module per command under commands/,
// each exporting `usage` and `run(argv)`; errors are printed by errors.ts alone.
import { printError } from "./errors";
import * as check from "./commands/check";
import * as llamaSource from "./commands/llama-source";
import * as local from "./commands/local";
import * as report from "./commands/report";
import * as runOnNode from "./commands/run";
import * as server from "./commands/server";
import * as sim from "./commands/sim";
import * as sync from "./commands/sync";

interface Command {
  readonly summary: string;
  readonly usage: string;
  run(argv: string[]): Promise<number>;
}

const commands: Record<string, Command> = {
  local,
  sync,
  run: runOnNode,
  server,
  sim,
  "llama-source": llamaSource,
  check,
  report,
};

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  return [
    "usage: sparkform <command> [options]",
    ...Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    "`sparkform <command> --help` for a command's options.",
  ].join("\n");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    process.stdout.write(`${usage()}\n`);
    return name === undefined ? 2 : 0;
  }
  const command = commands[name];
  if (!command) {
    process.stderr.write(`sparkform: unknown command ${JSON.stringify(name)}\n${usage()}\n`);
    return 2;
  }
  if (rest[0] === "--help" || rest[0] === "-h") {
    process.stdout.write(`${command.usage}\n`);
    return 0;
  }
  try {
    return await command.run(rest);
  } catch (err) {
    return printError(name, err, command.usage);
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => process.exit(printError("", err)),
);
