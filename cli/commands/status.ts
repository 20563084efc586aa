// `sparkform status [--stack S]`: the summary the main job ends with, from the stack's outputs
// at any time (cli/summary.ts renders it; nothing here connects to a node). The outputs come
// from the stack cache while the state is unchanged (cli/stack-cache.ts).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { pulumiBinary, pulumiEnv, repoRoot } from "../../setup/pulumi/env";
import { stackState } from "../engine";
import { out } from "../errors";
import { stateEvidence } from "../evidence";
import { readOutputs } from "../stack";
import { cached, outputsKey, selectedStackName } from "../stack-cache";
import { summaryLines } from "../summary";

export const usage = `usage: sparkform status [--stack S] [--json]
  --stack S   the stack (default: the selected one)
  --json      the stack's outputs as JSON instead (what the summary is made from), with
              \`evidence\`: what the outputs summarise, from the resources' state (each node's
              whole fact sheet, the build's instruction counts, the server's whole plan, its
              renderings and the smoke's token ids)`;

/** The selected stack's name, for the commands the summary names. */
function selectedStack(): string {
  const fromWorkspace = selectedStackName();
  if (fromWorkspace) return fromWorkspace;
  const r = spawnSync(pulumiBinary(), ["stack", "--show-name"], {
    cwd: repoRoot,
    env: pulumiEnv(),
    encoding: "utf8",
  });
  const name = r.status === 0 ? r.stdout.trim() : "";
  if (!name) {
    throw new Error(
      "no stack is selected: pass --stack S (the simulated pair's is `local`, made by `npm run local`)",
    );
  }
  return name;
}

/** Where `report fabric` writes the stack's report (report.ts's default). */
export function fabricReportDir(stack: string): string {
  return path.join(repoRoot, ".sparkform", "reports", `fabric-${stack}`);
}

/** The summary of `stack`'s outputs, as `status` and the end of `local` print it. */
export function stackSummary(stack: string): string[] {
  const outputs = readOutputs(stack);
  const dir = fabricReportDir(stack);
  return summaryLines(outputs, {
    stack,
    ...(existsSync(path.join(dir, "fabric.md"))
      ? { fabricReportDir: path.relative(process.cwd(), dir) || "." }
      : {}),
  });
}

export function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: { stack: { type: "string" }, json: { type: "boolean" } },
  });
  const stack = values.stack ?? selectedStack();
  if (values.json) {
    // The outputs (cached), then `pulumi stack export` for what they leave to the state.
    const outputs = readOutputs(stack);
    const evidence = cached(outputsKey(stack, repoRoot, "evidence"), () =>
      stateEvidence(stackState(stack)),
    );
    out(JSON.stringify({ ...outputs, evidence }, null, 2));
  } else {
    out(stackSummary(stack).join("\n"));
  }
  return Promise.resolve(0);
}
