// The CLI commands that change a stack (`sync`, `worker`) do it through the Pulumi engine, so
// the stack's state stays true and the policy gate holds: a targeted `up` of the resources the
// command touches, under the stack's policy config (setup/pulumi/policy.ts), with the engine's
// own progress on the terminal. This module runs it and reads the stack's resources back.
import { spawnSync } from "node:child_process";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";
import { policyPackArgs, selectedStack } from "../setup/pulumi/policy";
import type { StackState } from "../stack-state";
import { readExport } from "./stack";
import { forgetCheckpoints } from "./stack-cache";
import { UsageError } from "./errors";

/** The stack a command acts on: the one given, else the selected one. */
export function stackName(given: string | undefined): string {
  const stack = given ?? selectedStack();
  if (!stack) throw new UsageError("no stack is selected: give --stack (e.g. --stack local)");
  return stack;
}

/** Where the engine's output goes: captured, the terminal, or all of it to stderr. */
type Output = "capture" | "inherit" | "stderr";

function pulumi(args: string[], stack: string, output: Output, env: NodeJS.ProcessEnv = {}) {
  const r = spawnSync(pulumiBinary(), [...args, "-s", stack], {
    cwd: repoRoot,
    env: { ...pulumiEnv(), ...env },
    encoding: "utf8",
    maxBuffer: 256 << 20,
    stdio:
      output === "capture"
        ? ["ignore", "pipe", "pipe"]
        : output === "stderr"
          ? ["inherit", 2, 2]
          : "inherit",
  });
  // The engine may have written the stack's checkpoint: the next read looks at it again.
  forgetCheckpoints();
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
 * the engine's exit code; its output goes to the terminal (with `toStderr`, all of it to
 * stderr: the caller's stdout is JSON).
 */
export function upTargets(
  stack: string,
  urns: readonly string[],
  o: { refresh: boolean; toStderr?: boolean },
): number {
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
    o.toStderr ? "stderr" : "inherit",
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
  env: NodeJS.ProcessEnv = {},
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
    "capture",
    env,
  );
  return { code: r.status ?? 1, output: `${r.stdout}${r.stderr}`.trim() };
}
