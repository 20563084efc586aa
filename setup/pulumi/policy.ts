// Which policy pack a stack runs under, and with which policy config: decided here, once, for
// every command that runs the engine (`npm run local`, `npm run pulumi`, `sparkform sync` and
// `worker`, the bench, the tests). A stack's policy config is `stacks/policies.<stack>.json`
// beside its `stacks/Pulumi.<stack>.yaml`: the local stack's makes `rdma-transport` advisory
// on the simulated fabric (its RDMA facts are fixtures, its transport TCP by construction), and
// a real stack without such a file runs every policy at its default, mandatory level.
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { pulumiBinary, pulumiEnv, repoRoot } from "./env";

/** The project's policy pack (policies/PulumiPolicy.yaml). */
export const POLICY_PACK = path.join(repoRoot, "policies");

/** `stacks/policies.<stack>.json`, the stack's policy config, when it has one. */
export function stackPolicyConfig(stack: string): string | undefined {
  const file = path.join(repoRoot, "stacks", `policies.${stack}.json`);
  return existsSync(file) ? file : undefined;
}

/** `--policy-pack policies [--policy-pack-config stacks/policies.<stack>.json]`. */
export function policyPackArgs(stack: string): string[] {
  const config = stackPolicyConfig(stack);
  return ["--policy-pack", POLICY_PACK, ...(config ? ["--policy-pack-config", config] : [])];
}

/** The stack a pulumi argv names (`-s S`, `--stack S`, `--stack=S`), if any. */
export function stackArg(argv: readonly string[]): string | undefined {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if ((a === "-s" || a === "--stack") && i + 1 < argv.length) return argv[i + 1];
    if (a.startsWith("--stack=")) return a.slice("--stack=".length);
  }
  return undefined;
}

/** The stack pulumi has selected in this project (`pulumi stack --show-name`), if any. */
export function selectedStack(env: NodeJS.ProcessEnv = pulumiEnv()): string | undefined {
  const r = spawnSync(pulumiBinary(), ["stack", "--show-name"], {
    cwd: repoRoot,
    env,
    encoding: "utf8",
  });
  const name = r.status === 0 ? r.stdout.trim() : "";
  return name || undefined;
}

/**
 * A pulumi argv with the stack's policy config added where it asks for the policy pack and
 * names no config of its own: `npm run pulumi -- up -s local --policy-pack policies` then runs
 * exactly as `npm run local` does. Anything else is returned as it is.
 */
export function withStackPolicyConfig(
  argv: readonly string[],
  stackOf: () => string | undefined = () => selectedStack(),
): string[] {
  const asksForPack = argv.some((a) => a === "--policy-pack" || a.startsWith("--policy-pack="));
  const hasConfig = argv.some(
    (a) => a === "--policy-pack-config" || a.startsWith("--policy-pack-config="),
  );
  if (!asksForPack || hasConfig || argv.includes("--")) return [...argv];
  const stack = stackArg(argv) ?? stackOf();
  const config = stack ? stackPolicyConfig(stack) : undefined;
  return config ? [...argv, "--policy-pack-config", config] : [...argv];
}
