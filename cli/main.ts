// `npx sparkform <command>`: the project's own CLI. One module per command under commands/,
// each exporting `usage` and `run(argv)`; errors are printed by errors.ts alone.
import { exitAfterOutput, printError } from "./errors";

interface Command {
  readonly summary: string;
  readonly usage: string;
  run(argv: string[]): Promise<number>;
}

function load(file: string): Command {
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- tsx's require hook compiles it
  return require(`./commands/${file}`) as Command;
}

// Loaded on demand: a command pays only for its own imports (all of them together cost
// seconds of start-up on a busy machine, which `doctor` and `worker` users feel every call).
const commands: Record<string, () => Command> = {
  local: () => load("local"),
  sync: () => load("sync"),
  run: () => load("run"),
  worker: () => load("worker"),
  server: () => load("server"),
  sim: () => load("sim"),
  "llama-source": () => load("llama-source"),
  check: () => load("check"),
  report: () => load("report"),
  status: () => load("status"),
  doctor: () => load("doctor"),
  endpoint: () => load("endpoint"),
};

function usage(): string {
  const width = Math.max(...Object.keys(commands).map((c) => c.length));
  const loaded = Object.entries(commands).map(([name, get]) => [name, get()] as const);
  return [
    "usage: sparkform <command> [options]",
    ...loaded.map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`),
    "`sparkform <command> --help` for a command's options.",
  ].join("\n");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "help" || name === "--help" || name === "-h") {
    process.stdout.write(`${usage()}\n`);
    return name === undefined ? 2 : 0;
  }
  const get = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!get) {
    process.stderr.write(`sparkform: unknown command ${JSON.stringify(name)}\n${usage()}\n`);
    return 2;
  }
  const command = get();
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

// A reader that closes the pipe early (`sparkform status --json | head -1`) is no error of the
// command's: stop quietly, as a tool ended by SIGPIPE does (exit status 128 + 13).
for (const stream of [process.stdout, process.stderr]) {
  stream.on("error", (err: NodeJS.ErrnoException) => {
    if (err.code !== "EPIPE") throw err;
    process.exit(141);
  });
}

main(process.argv.slice(2)).then(exitAfterOutput, (err: unknown) =>
  exitAfterOutput(printError("", err)),
);
