// `sparkform sync`: the runbook's sync.sh — push the working tree to every node and prove it by
// digest, nothing else. A targeted `pulumi up` of the tree stage's resources, so the stack's
// state stays true (the next refresh agrees) and the proof is the one TreeSync always makes.
import { spawnSync } from "node:child_process";
import { parseArgs } from "node:util";
import { pulumiBinary, pulumiEnv, repoRoot } from "../../setup/pulumi/env";
import { policyPackArgs, selectedStack } from "../../setup/pulumi/policy";
import { out, UsageError } from "../errors";

export const summary = "push the working tree to every node and prove it by digest";
export const usage = `usage: sparkform sync [--stack S]
  --stack S   the stack (default: the selected one)`;

const TREE_SYNC = "pulumi-nodejs:dynamic/sparkform:TreeSync";

interface Exported {
  urn: string;
  type: string;
  inputs?: { kind?: string };
  outputs?: {
    kind?: string;
    target?: { name?: string };
    digest?: string;
    expectedDigest?: string;
    files?: number;
    bytes?: number;
  };
}

function pulumi(args: string[], stack: string | undefined, capture: boolean) {
  const r = spawnSync(pulumiBinary(), [...args, ...(stack ? ["-s", stack] : [])], {
    cwd: repoRoot,
    env: pulumiEnv(),
    encoding: "utf8",
    maxBuffer: 256 << 20,
    stdio: capture ? ["ignore", "pipe", "pipe"] : "inherit",
  });
  if (r.error) throw r.error;
  return r;
}

/** The stack's TreeSync resources (by type, or the pre-stage generic type and its kind). */
export function treeSyncs(exported: unknown): Exported[] {
  const resources =
    (exported as { deployment?: { resources?: Exported[] } })?.deployment?.resources ?? [];
  return resources.filter(
    (r) =>
      r.type === TREE_SYNC ||
      (r.type === "pulumi-nodejs:dynamic:Resource" && r.outputs?.kind === "TreeSync"),
  );
}

function exportStack(stack: string | undefined): unknown {
  const r = pulumi(["stack", "export"], stack, true);
  if (r.status !== 0) {
    throw new Error(
      `pulumi stack export failed: ${r.stderr.trim()}; select the stack with --stack`,
    );
  }
  return JSON.parse(r.stdout) as unknown;
}

export async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { stack: { type: "string" } },
    strict: true,
  });
  const before = treeSyncs(exportStack(values.stack));
  if (before.length === 0) {
    throw new UsageError(
      "the stack has no synced tree yet: set sparkform:tree and run `pulumi up` (or `npm run local`) once",
    );
  }
  // The stack's own policy config, as every command that runs the engine applies it.
  const stack = values.stack ?? selectedStack();
  if (!stack) throw new UsageError("no stack is selected: give --stack (e.g. --stack local)");
  const up = pulumi(
    [
      "up",
      "--yes",
      "--skip-preview",
      ...policyPackArgs(stack),
      ...before.flatMap((r) => ["--target", r.urn]),
    ],
    stack,
    false,
  );
  if (up.status !== 0) return up.status ?? 1;
  // The proof, from state: every node's digest is the control node's.
  let ok = true;
  for (const r of treeSyncs(exportStack(values.stack))) {
    const o = r.outputs ?? {};
    const same = o.digest !== undefined && o.digest === o.expectedDigest;
    ok &&= same;
    out(
      `${o.target?.name ?? r.urn}: ${o.files ?? 0} files, ${((o.bytes ?? 0) / 1e6).toFixed(1)} MB, ` +
        `digest ${(o.digest ?? "").slice(0, 16)} ${same ? "= the control node's" : `!= the control node's ${(o.expectedDigest ?? "").slice(0, 16)}`}`,
    );
  }
  return ok ? 0 : 1;
}
