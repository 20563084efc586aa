// `sparkform <command>`: the project's own CLI. One module per command under commands/,
// each exporting `usage` and `run(argv)`; errors are printed by errors.ts alone.
import { exitAfterOutput, printError } from "./errors";
import { setCliBuild } from "./stack-cache";

interface Command {
  readonly usage: string;
  run(argv: string[]): Promise<number>;
}

interface Entry {
  /** The line `sparkform --help` prints: here, so the listing loads no command module. */
  readonly summary: string;
  readonly load: () => Command;
}

// Loaded on demand, each by a require of its own (which the bundle keeps lazy): a command pays
// only for its own imports, and `--help` for none.
/* eslint-disable @typescript-eslint/no-require-imports -- lazy loading is the point */
const entry = (summary: string, load: () => unknown): Entry => ({
  summary,
  load: load as () => Command,
});
export const commands: Record<string, Entry> = {
  local: entry("the main job: the simulated pair up, then `pulumi up` of the local stack", () =>
    require("./commands/local"),
  ),
  sync: entry("push the working tree to every node and prove it by digest", () =>
    require("./commands/sync"),
  ),
  run: entry("run a command on a node in the synced tree, under the build contract", () =>
    require("./commands/run"),
  ),
  worker: entry("start, stop, restart or look at a worker node's ggml-rpc-server", () =>
    require("./commands/worker"),
  ),
  server: entry("the stack's llama-server: its log, or its unit, health and placement", () =>
    require("./commands/server"),
  ),
  sim: entry("the simulated cluster: up, status, down, stop, start, link, rate, exec, info", () =>
    require("./commands/sim"),
  ),
  "llama-source": entry(
    "extract the pinned llama.cpp source (node-llama-cpp's bundle) into <dir>",
    () => require("./commands/llama-source"),
  ),
  check: entry(
    "check evidence: `check nccl-log <file>` (an NCCL_DEBUG=INFO log; 0 pass, 1 fail)",
    () => require("./commands/check"),
  ),
  report: entry("write the fabric report (markdown + topology SVG/PNG) from a stack", () =>
    require("./commands/report"),
  ),
  status: entry("what the stack holds: nodes, digests, model, fabric, workers, serving", () =>
    require("./commands/status"),
  ),
  doctor: entry("preflight: control node, backend, config, policies, every node (read-only)", () =>
    require("./commands/doctor"),
  ),
  endpoint: entry("the stack's OpenAI-compatible endpoint on this machine, through ssh", () =>
    require("./commands/endpoint"),
  ),
  drift: entry(
    "one drift check of the stack (lock-free): 0 clean, 1 drift, 2 could not check",
    () => require("./commands/drift"),
  ),
  key: entry("print the stack's API key (for OPENAI_API_KEY), and nothing else", () =>
    require("./commands/key"),
  ),
  team: entry("share a stack with a team: its state on PostgreSQL (move, login, logout)", () =>
    require("./commands/team"),
  ),
};
/* eslint-enable @typescript-eslint/no-require-imports */

export function usage(): string {
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
  const entry = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!entry) {
    process.stderr.write(`sparkform: unknown command ${JSON.stringify(name)}\n${usage()}\n`);
    return 2;
  }
  const command = entry.load();
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

/**
 * Run the CLI on `argv` and end the process with its exit code. bin/sparkform.js calls it, with
 * the name of the bundle it runs (`build`), or without one when it runs the sources.
 */
export function cli(argv: string[], build?: string): void {
  setCliBuild(build);
  // A reader that closes the pipe early (`sparkform status --json | head -1`) is no error of
  // the command's: stop quietly, as a tool ended by SIGPIPE does (exit status 128 + 13).
  for (const stream of [process.stdout, process.stderr]) {
    stream.on("error", (err: NodeJS.ErrnoException) => {
      if (err.code !== "EPIPE") throw err;
      process.exit(141);
    });
  }
  main(argv).then(exitAfterOutput, (err: unknown) => exitAfterOutput(printError("", err)));
}
