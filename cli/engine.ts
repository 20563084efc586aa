// The CLI commands that change a stack (`sync`, `worker`) do it through the Pulumi engine, so
// the stack's state stays true and the policy gate holds: a targeted `up` of the resources the
// command touches, under the stack's policy config (setup/pulumi/policy.ts), with the engine's
// own progress on the terminal. This module runs it and reads the stack's resources back.
import { spawnSync } from "node:child_process";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";
import { policyPackArgs, selectedStack } from "../setup/pulumi/policy";
import type { StackState } from "../stack-state";
import { readExport } from "./stack";
import { UsageError } from "./errors";

/** The stack a command acts on: the one given, else the selected one. */
export function stackName(given: string | undefined): string {
  const stack = given ?? selectedStack();
  if (!stack) throw new UsageError("no stack is selected: give --stack (e.g. --stack local)");
  return stack;
}

function pulumi(args: string[], stack: string, capture: boolean) {
  const r = spawnSync(pulumiBinary(), [...args, "-s", stack], {
    cwd: repoRoot,
    env: pulumiEnv(),
    encoding: "utf8",
    maxBuffer: 256 << 20,
    stdio: capture ? ["ignore", "pipe", "pipe"] : "inherit",
  });
  if (r.error) throw r.error;
  return r;
}

/** The stack's state (`pulumi stack export`), read once by stack-state.ts. */
export function stackState(stack: string): StackState {
  return readExport(stack, repoRoot);
}

/**
 * `pulumi up` of `urns` only, under the stack's policy config; with `refresh`, those resources
 * are re-measured first, so what changed on a node out of band is what `up` converges. Returns
 * the engine's exit code; its output goes to the terminal.
 */
export function upTargets(stack: string, urns: readonly string[], o: { refresh: boolean }): number {
  const r = pulumi(
    [
      "up",
      "--yes",
      "--skip-preview",
      ...(o.refresh ? ["--refresh"] : []),
      ...policyPackArgs(stack),
      ...urns.flatMap((u) => ["--target", u]),
    ],
    stack,
    false,
  );
  return r.status ?? 1;
}

/**
 * `pulumi refresh` of `urns` only: each resource reads the node again and the state records what
 * it found. Returns the engine's exit code and its output (for a failure to show).
 */
export function refreshTargets(
  stack: string,
  urns: readonly string[],
): { code: number; output: string } {
  const r = pulumi(
    [
      "refresh",
      "--yes",
      "--skip-preview",
      "--non-interactive",
      ...urns.flatMap((u) => ["--target", u]),
    ],
    stack,
    true,
  );
  return { code: r.status ?? 1, output: `${r.stdout}${r.stderr}`.trim() };
}
