// The real-hardware stacks (stacks/Pulumi.spark-pair.yaml, Pulumi.spark-quad.yaml) as the pulumi
// CLI hands them to the program, and their SET-ME placeholders filled as a user would.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { pulumiBinary, repoRoot } from "../../setup/pulumi/env";

/** Scratch projects of stackConfig() (in the OS temp dir; a few KB each). */
const tmp = mkdtempSync(path.join(tmpdir(), "sf-stacks-"));

/** Remove stackConfig()'s scratch projects (call it in afterAll). */
export function removeScratch(): void {
  rmSync(tmp, { recursive: true, force: true });
}

/** The stack's config as the pulumi CLI reads it (a copy: `stack init` rewrites the file). */
export function stackConfig(stack: string): Record<string, unknown> {
  const known = read.get(stack);
  if (known) return known;
  const dir = path.join(tmp, stack);
  mkdirSync(path.join(dir, "stacks"), { recursive: true });
  copyFileSync(path.join(repoRoot, "Pulumi.yaml"), path.join(dir, "Pulumi.yaml"));
  copyFileSync(
    path.join(repoRoot, "stacks", `Pulumi.${stack}.yaml`),
    path.join(dir, "stacks", `Pulumi.${stack}.yaml`),
  );
  const env = {
    PATH: process.env.PATH ?? "",
    PULUMI_HOME: path.join(dir, "home"),
    PULUMI_BACKEND_URL: `file://${path.join(dir, "backend")}`,
    PULUMI_CONFIG_PASSPHRASE: "test",
    PULUMI_SKIP_UPDATE_CHECK: "true",
  };
  mkdirSync(path.join(dir, "backend"));
  const pulumi = (args: string[]) =>
    execFileSync(pulumiBinary(), [...args, "--non-interactive"], {
      cwd: dir,
      env,
      encoding: "utf8",
    });
  pulumi(["stack", "init", stack]);
  const json = JSON.parse(pulumi(["config", "--json", "-s", stack])) as Record<
    string,
    { value: string; objectValue?: unknown }
  >;
  const config = Object.fromEntries(
    Object.entries(json).map(([k, v]) => [k.replace(/^sparkform:/, ""), v.objectValue ?? v.value]),
  );
  read.set(stack, config);
  return config;
}
const read = new Map<string, Record<string, unknown>>();

export const HOST_KEY =
  "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKq1xXcB0Y0vRk8Jm1b7hQ5cX3kT2m4yG9wZ8sV6pL0e";
export const SHARDS = [1, 2, 3].map((i) => `Q4_K_M/Qwen3-235B-A22B-Q4_K_M-0000${i}-of-00003.gguf`);

/** The placeholders filled as a user would (values of the right shape, not real ones). */
export function filled(raw: Record<string, unknown>): Record<string, unknown> {
  const nodes = raw.nodes as Record<string, unknown>[];
  const model = raw.model as Record<string, unknown>;
  const build = raw.build as Record<string, unknown>;
  return {
    ...raw,
    nodes: nodes.map((n) => ({ ...n, hostKey: HOST_KEY })),
    model: {
      ...model,
      revision: "c".repeat(40),
      sha256: Object.fromEntries(SHARDS.map((s, i) => [s, String(i + 1).repeat(64)])),
    },
    build: { ...build, commit: "80fb11ac73e66d89eae2c6a91d8a77428fa733ed" },
  };
}
