// A deployed stack as the CLI commands see it: its validated configuration (through the same
// schema the program uses) and its outputs, read with the pulumi CLI that setup chose. The
// secrets are read to connect and never printed; they reach ssh as a 0600 key file, as in the
// providers.
import { spawnSync } from "node:child_process";
import { parseStackConfig, type StackConfigData, sshTarget } from "../components/config";
import type { SshTarget } from "../components/transport/ssh";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";

export interface StackView {
  /** The stack's name as given, or the selected stack. */
  readonly name: string | undefined;
  readonly config: StackConfigData;
  /** `pulumi stack output --json`: facts, tree, build, model, … */
  readonly outputs: Record<string, unknown>;
  /** How the control node reaches `node` (the stack's pinned host key, its key). */
  target(node: string): SshTarget;
}

/** `pulumi <args> --json` of the project's stacks, parsed; an error says how to select or make one. */
export function pulumiJson(args: string[], what: string, cwd = repoRoot): unknown {
  const r = spawnSync(pulumiBinary(), [...args, "--json"], {
    cwd,
    env: pulumiEnv(),
    encoding: "utf8",
    maxBuffer: 64 << 20,
  });
  if (r.error) throw r.error;
  if (r.status !== 0) {
    throw new Error(
      `cannot read the stack's ${what} (pulumi ${args.join(" ")} exited ${r.status}):\n` +
        `${r.stderr.trim()}\nSelect the stack with --stack, or create it with \`npm run local\` / \`pulumi up\`.`,
    );
  }
  return JSON.parse(r.stdout) as unknown;
}

/**
 * Read stack `name` (default: the selected stack) from the project's backend; `projectDir` is
 * the Pulumi project's directory (default: this checkout).
 */
export function readStack(name: string | undefined, projectDir = repoRoot): StackView {
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
  const config = parseStackConfig(raw, { projectDir: repoRoot });
  const privateKey = typeof raw.privateKey === "string" ? raw.privateKey : undefined;
  const outputs = pulumiJson(["stack", "output", ...s], "outputs", projectDir) as Record<
    string,
    unknown
  >;
  return {
    name,
    config,
    outputs,
    target(node) {
      const n = config.nodes.find((x) => x.name === node);
      if (!n) {
        throw new Error(
          `${JSON.stringify(node)} is not a node of this stack (${config.nodes.map((x) => x.name).join(", ")})`,
        );
      }
      return { ...sshTarget(n, config), ...(privateKey ? { privateKey } : {}) };
    },
  };
}
