// A deployed stack as the CLI commands see it: its validated configuration (through the same
// schema the program uses) and its outputs, read with the pulumi CLI that setup chose. The
// secrets are read to connect and never printed; they reach ssh as a 0600 key file, as in the
// providers.
//
// Each read through the pulumi CLI is a process (~0.3-1 s: `pulumi config --show-secrets`
// decrypts, `pulumi stack output` loads the state), and `sparkform run` needs both. So what a
// read returned is kept under .sparkform/cache/ and used again while nothing it came from has
// changed (stack-cache.ts says what that is). The cache holds no secret: only which secrets are
// set, and those are read through pulumi when a command needs them.
import { spawnSync } from "node:child_process";
import { statSync } from "node:fs";
import type { StackConfigData } from "../components/stack-config";
import type { SshTarget } from "../components/transport";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";
import { parseOutputsText, parseStackOutputs, type StackOutputs } from "../stack-outputs";
import { readState, type StackState } from "../stack-state";
import { type Recorded, recordedOf } from "./recorded";
import { cached, configKey, outputsKey, selectedStackName } from "./stack-cache";

export interface StackView {
  /** The stack's name as given, or the selected stack. */
  readonly name: string | undefined;
  readonly config: StackConfigData;
  /**
   * `pulumi stack output --json`, validated once (stack-outputs.ts): facts, tree, build, model, …
   * Read on first use: a command that needs only the config and the targets (`sync`) never
   * starts pulumi for them.
   */
  readonly outputs: StackOutputs;
  /**
   * What the resources recorded at the last `up` (cli/recorded.ts): how the worker was started,
   * where the server runs, the flags each build was made with. Read on first use, from
   * `pulumi stack export` (cached like the outputs: it depends on the same state file).
   */
  readonly recorded: Recorded;
  /** How the control node reaches `node` (the stack's pinned host key, its key). */
  target(node: string): SshTarget;
}

/**
 * `pulumi <args>`'s stdout in the project; an error says how to select or make the stack.
 * `maxBuffer`: a stack export holds every resource's state, far more than its outputs.
 */
function pulumiStdout(args: string[], what: string, cwd: string, maxBuffer = 64 << 20): string {
  const r = spawnSync(pulumiBinary(), args, { cwd, env: pulumiEnv(), encoding: "utf8", maxBuffer });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    throw new Error(
      `cannot read the stack's ${what} (pulumi ${args.join(" ")} exited ${r.status}):\n` +
        `${r.stderr.trim()}\nSelect the stack with --stack, or create it with \`npm run local\` / \`pulumi up\`.`,
    );
  }
  return r.stdout;
}

/** `pulumi <args> --json`'s text of the project's stacks; an error says how to select or make one. */
export function pulumiText(args: string[], what: string, cwd = repoRoot): string {
  return pulumiStdout([...args, "--json"], what, cwd);
}

/** `pulumi stack export` of `stack`, read by stack-state.ts (secrets stay ciphertext). */
export function readExport(stack: string, projectDir = projectRoot()): StackState {
  return readState(
    pulumiStdout(["stack", "export", "-s", stack], "state", projectDir, 256 << 20),
    stack,
  );
}

/** `pulumi <args> --json` of the project's stacks, parsed (config; outputs go through parseOutputsText). */
export function pulumiJson(args: string[], what: string, cwd = repoRoot): unknown {
  return JSON.parse(pulumiText(args, what, cwd)) as unknown;
}

/**
 * The Pulumi project whose stacks the commands read: this checkout, unless
 * SPARKFORM_PROJECT_DIR names another (a project of your own that uses sparkform's components).
 */
export function projectRoot(): string {
  return process.env.SPARKFORM_PROJECT_DIR || repoRoot;
}

function isDirectory(p: string): boolean {
  try {
    return statSync(p).isDirectory();
  } catch {
    return false;
  }
}

/** The stack's configuration as parsed, plus what a command needs to connect without reparsing. */
interface ConfigRead {
  readonly config: StackConfigData;
  /** Per node, how the control node reaches it (no private key: see `privateKey`). */
  readonly targets: Record<string, SshTarget>;
  /** Whether `sparkform:privateKey` is set (its text stays in the stack, encrypted). */
  readonly privateKey: boolean;
}

function readConfig(name: string | undefined, projectDir: string): ConfigRead {
  const s = name ? ["-s", name] : [];
  const entries = pulumiJson(
    ["config", "--show-secrets", ...s],
    "configuration",
    projectDir,
  ) as Record<string, { value?: string; objectValue?: unknown }>;
  const raw: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(entries)) {
    if (!key.startsWith("sparkform:")) continue;
    raw[key.slice("sparkform:".length)] = v.objectValue ?? v.value;
  }
  // The schema and its zod only here, on a read through pulumi: a cached read needs neither.
  const { parseStackConfig, sshTarget } =
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded on demand
    require("../components/stack-config") as typeof import("../components/stack-config");
  const config = parseStackConfig(raw, { projectDir });
  return {
    config,
    targets: Object.fromEntries(config.nodes.map((n) => [n.name, sshTarget(n, config)])),
    privateKey: typeof raw.privateKey === "string" && raw.privateKey !== "",
  };
}

/** `sparkform:privateKey`'s text, read when a command connects (never cached). */
function readPrivateKey(name: string | undefined, projectDir: string): string {
  const s = name ? ["-s", name] : [];
  const { value } = pulumiJson(
    ["config", "get", "sparkform:privateKey", ...s],
    "private key",
    projectDir,
  ) as { value?: unknown };
  if (typeof value !== "string") throw new Error("sparkform:privateKey is not text: set it again");
  return value;
}

/** `pulumi stack output --json` of stack `name` (default: the selected one), cached. */
export function readOutputs(name: string | undefined, projectDir = projectRoot()): StackOutputs {
  const stack = name ?? selectedStackName(projectDir);
  const read = () =>
    parseOutputsText(
      pulumiText(["stack", "output", ...(stack ? ["-s", stack] : [])], "outputs", projectDir),
      stack,
    );
  if (!stack) return read();
  // Validated after the cache too: a cache written by an older CLI is checked like a fresh read.
  return parseStackOutputs(cached(outputsKey(stack, projectDir), read), stack);
}

/** What stack `stack`'s resources recorded (cli/recorded.ts), cached. */
function readRecorded(
  stack: string | undefined,
  config: StackConfigData,
  projectDir: string,
): Recorded {
  if (!stack)
    throw new Error("no stack is selected: give --stack (e.g. --stack local), or select one");
  const names = config.nodes.map((n) => n.name);
  return cached(outputsKey(stack, projectDir, "recorded"), () =>
    recordedOf(readExport(stack, projectDir), names),
  );
}

/**
 * Read stack `name` (default: the selected stack) from the project's backend; `projectDir` is
 * the Pulumi project's directory (default: this checkout).
 */
export function readStack(name: string | undefined, projectDir = projectRoot()): StackView {
  const stack = name ?? selectedStackName(projectDir);
  const readC = () => readConfig(stack, projectDir);
  let read = stack ? cached(configKey(stack, projectDir), readC) : readC();
  // The one check of the parse that looks at the control node: a tree source gone since then
  // is read again, so the schema's error says so.
  if (read.config.tree && !isDirectory(read.config.tree.source)) read = readC();
  const { config, targets, privateKey } = read;
  let outputs: StackOutputs | undefined;
  let recorded: Recorded | undefined;
  let key: string | undefined;
  return {
    name,
    config,
    get outputs() {
      return (outputs ??= readOutputs(stack, projectDir));
    },
    get recorded() {
      return (recorded ??= readRecorded(stack, config, projectDir));
    },
    target(node) {
      const t = Object.hasOwn(targets, node) ? targets[node] : undefined;
      if (!t) {
        throw new Error(
          `${JSON.stringify(node)} is not a node of this stack (${config.nodes.map((x) => x.name).join(", ")})`,
        );
      }
      if (privateKey) key ??= readPrivateKey(stack, projectDir);
      return { ...t, ...(key !== undefined ? { privateKey: key } : {}) };
    },
  };
}
