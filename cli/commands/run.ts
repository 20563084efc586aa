// `sparkform run <node> -- <command>`: the runbook's remote.sh — a command on a node, in the
// synced tree, under the environment contract the stack's builds use (components/build/
// contract.ts), in a non-login shell, through the same transport as everything else (pinned
// host key, every argument quoted). Exit code and output are the command's own.
import { parseArgs } from "node:util";
import { stackBuildFlags } from "../../components/build/tree-commit";
import { commandContract } from "../../components/build/contract";
import type { StackConfigData } from "../../components/stack-config";
import {
  buildRemoteCommand,
  type EnvValue,
  homeRelative,
  openNode,
  type PathEntry,
  type RemoteScript,
} from "../../components/transport";
import { UsageError } from "../errors";
import { readStack, type StackView } from "../stack";

export const usage = `usage: sparkform run <node> [--stack S] [--big-cores] [--env K=V]... [--login] [--print] -- <command> [args...]
  --stack S      the stack (default: the selected one)
  --big-cores    pin to the node's performance cores from its fact sheet (taskset; GB10: 5-9,15-19)
  --env K=V      one more environment variable (repeatable; overrides the contract's)
  --login        run through a login shell (DGX OS puts nvcc on the login PATH only: rarely wanted)
  --print        print the exact remote command instead of running it`;

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** ssh's own failures exit 255; every other status is the command's. */
const COMMAND_EXIT_CODES = Array.from({ length: 255 }, (_, i) => i);

export { cpuList } from "../../components/outputs";

const onNode = (p: string): string | { home: string } =>
  p.startsWith("~") ? { home: homeRelative(p) } : p;

interface RunRequest {
  readonly node: string;
  readonly argv: readonly string[];
  readonly bigCores: boolean;
  readonly login: boolean;
  readonly env: Readonly<Record<string, string>>;
}

/** The performance cores `node`'s facts list (a CPU list), or an error saying there are none. */
function performanceCores(view: StackView, node: string): string {
  const cores = view.outputs.facts?.[node]?.performanceCores;
  if (!cores) {
    throw new Error(
      `--big-cores: ${node}'s fact sheet lists no performance cores ` +
        `(\`sparkform status --json\` shows the sheet and why); run without --big-cores`,
    );
  }
  return cores;
}

/** The model file on `node`, when the stack put its model there. */
function modelFile(config: StackConfigData, view: StackView, node: string): string | undefined {
  const dir = view.outputs.model?.nodes[node]?.dir;
  const gguf = config.model?.files.find((f) => f.endsWith(".gguf"));
  return dir && gguf ? `${dir}/${gguf}` : undefined;
}

/** The remote script for `req` on a stack: pure, so `--print` shows exactly what runs. */
export function runScript(view: StackView, req: RunRequest): RemoteScript {
  const { config } = view;
  if (!config.nodes.some((n) => n.name === req.node)) {
    throw new UsageError(
      `${JSON.stringify(req.node)} is not a node of this stack (${config.nodes.map((n) => n.name).join(", ")})`,
    );
  }
  const tree = config.tree;
  if (!tree) {
    throw new Error("the stack has no sparkform:tree: `run` runs in the synced tree; set it");
  }
  // The flags the node's build was made with, as its NativeBuild recorded them; rendered from
  // config (git in the tree for the commit) only before the first `up`.
  const flags = config.build
    ? (view.recorded.buildFlags[req.node] ??
      stackBuildFlags(config.build, { source: tree.source, exclude: tree.exclude }))
    : undefined;
  const model = modelFile(config, view, req.node);
  const contract = commandContract({
    ...(flags ? { flags } : {}),
    binPaths: config.toolchain?.binPaths ?? [],
    ...(config.model ? { modelsDir: config.model.modelsDir } : {}),
    ...(model ? { modelFile: model } : {}),
  });
  for (const k of Object.keys(req.env)) {
    if (!ENV_NAME.test(k)) throw new UsageError(`--env ${k}: not a variable name`);
  }
  const env: Record<string, EnvValue> = {};
  for (const [k, v] of Object.entries({ ...contract.env, ...req.env })) env[k] = onNode(v);
  let argv = [...req.argv];
  if (req.bigCores) argv = ["taskset", "-c", performanceCores(view, req.node), ...argv];
  if (req.login) argv = ["bash", "-l", "-c", 'exec "$@"', "sparkform-run", ...argv];
  const dir = onNode(tree.dest);
  return {
    // cd into the tree, then the command as its own argv: nothing is pasted into script text.
    script: 'cd -- "$1" || exit 127\nshift\nexec "$@"',
    args: [typeof dir === "string" ? dir : dir.home, ...argv],
    env,
    path: contract.path.map((p): PathEntry => onNode(p)),
    display: argv.join(" "),
  };
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: {
      stack: { type: "string" },
      "big-cores": { type: "boolean" },
      env: { type: "string", multiple: true },
      login: { type: "boolean" },
      print: { type: "boolean" },
    },
    allowPositionals: true,
    strict: true,
  });
  const [node, ...command] = positionals;
  if (!node || command.length === 0) throw new UsageError("give a node and, after --, a command");
  const env: Record<string, string> = {};
  for (const kv of values.env ?? []) {
    const i = kv.indexOf("=");
    if (i <= 0) throw new UsageError(`--env ${kv}: give it as K=V`);
    env[kv.slice(0, i)] = kv.slice(i + 1);
  }
  const view = readStack(values.stack);
  const script = runScript(view, {
    node,
    argv: command,
    bigCores: values["big-cores"] ?? false,
    login: values.login ?? false,
    env,
  });
  // The command line and the command's output are passed through as they are, not made
  // terminal-safe (cli/errors.ts) as a log or a node's report is: the user typed the command and
  // asked to see what it writes, as `ssh node cmd` shows it (colours, progress bars, a pager's
  // screen), and may redirect it to a file, which must get the command's text unchanged.
  if (values.print) {
    process.stdout.write(`${buildRemoteCommand(script).commandLine}\n`);
    return 0;
  }
  const r = await openNode(view.target(node)).run(script, {
    step: `run on ${node}`,
    okExitCodes: COMMAND_EXIT_CODES,
    onLine: (line, stream) =>
      (stream === "stdout" ? process.stdout : process.stderr).write(`${line}\n`),
  });
  return r.exitCode;
}
