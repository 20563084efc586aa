// `sparkform sync`: the runbook's sync.sh — push the working tree to every node and prove it by
// digest, nothing else. A targeted `pulumi up` of the tree stage's resources (cli/engine.ts), so
// the stack's state stays true (the next refresh agrees) and the proof is the one TreeSync
// always makes.
import { parseArgs } from "node:util";
import { resourcesOfKind, stackName, stackResources, upTargets } from "../engine";
import { out, UsageError } from "../errors";

export const summary = "push the working tree to every node and prove it by digest";
export const usage = `usage: sparkform sync [--stack S]
  --stack S   the stack (default: the selected one)`;

interface TreeOutputs {
  digest?: string;
  expectedDigest?: string;
  files?: number;
  bytes?: number;
}

export async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { stack: { type: "string" } },
    strict: true,
  });
  const stack = stackName(values.stack);
  const before = resourcesOfKind(stackResources(stack), "TreeSync");
  if (before.length === 0) {
    throw new UsageError(
      "the stack has no synced tree yet: set sparkform:tree and run `pulumi up` (or `npm run local`) once",
    );
  }
  const code = upTargets(
    stack,
    before.map((r) => r.urn),
    { refresh: false },
  );
  if (code !== 0) return code;
  // The proof, from state: every node's digest is the control node's.
  let ok = true;
  for (const r of resourcesOfKind(stackResources(stack), "TreeSync")) {
    const o = (r.outputs ?? {}) as TreeOutputs & { target?: { name?: string } };
    const same = o.digest !== undefined && o.digest === o.expectedDigest;
    ok &&= same;
    out(
      `${o.target?.name ?? r.urn}: ${o.files ?? 0} files, ${((o.bytes ?? 0) / 1e6).toFixed(1)} MB, ` +
        `digest ${(o.digest ?? "").slice(0, 16)} ${same ? "= the control node's" : `!= the control node's ${(o.expectedDigest ?? "").slice(0, 16)}`}`,
    );
  }
  return ok ? 0 : 1;
}
