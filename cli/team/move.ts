// Moving a stack from one backend to another (a checkout's file:// to a team's PostgreSQL, or
// back) with nothing lost: Pulumi's own `stack export` | `stack init` + `stack import`, then a
// check that the destination holds what the source held — every resource once, each with the
// same inputs and outputs, the stack's outputs, and every secret decrypting to the same value —
// before the source's copy is removed. The export (secrets still ciphertext) stays behind as a
// 0600 backup under .sparkform/team/. The stack's config file (stacks/Pulumi.<stack>.yaml, with
// its `encryptionsalt`) is kept, so the same passphrase opens the stack on either backend.
import { spawnSync, type SpawnSyncReturns } from "node:child_process";
import { isDeepStrictEqual } from "node:util";
import * as fs from "node:fs";
import * as path from "node:path";
import { pulumiBinary, pulumiEnv, stateDir } from "../../setup/pulumi/env";
import { parseOutputsRecord } from "../../stack-outputs";
import { isSecret, readState } from "../../stack-state";
import { parseBackend } from "./backend";

export interface MovePlan {
  readonly stack: string;
  /** The backend the stack is on now (pulumiEnv's). */
  readonly from: string;
  /** The backend it goes to. */
  readonly to: string;
  /** The Pulumi project's directory. */
  readonly projectDir: string;
  /** The environment both sides run with (the operator's passphrase, PG* variables). */
  readonly env?: NodeJS.ProcessEnv;
  /** Progress, one line at a time. */
  readonly say?: (line: string) => void;
}

export interface MoveResult {
  readonly resources: number;
  readonly outputs: number;
  readonly secrets: number;
  /** The source's export, kept (secrets as ciphertext). */
  readonly backup: string;
}

/** A URL as a message may show it: no password. */
export function shownUrl(url: string): string {
  const b = parseBackend(url);
  return b.kind === "postgres" ? b.url : url;
}

/**
 * `pulumi ARGS` in `projectDir` against `backend`, with the operator's environment (their
 * passphrase, PG* variables); its output captured, an export's size allowed for.
 */
export function pulumiAt(
  backend: string,
  projectDir: string,
  env: NodeJS.ProcessEnv,
  args: string[],
): SpawnSyncReturns<string> {
  return spawnSync(pulumiBinary(), args, {
    cwd: projectDir,
    env: pulumiEnv({ ...env, PULUMI_BACKEND_URL: backend }),
    encoding: "utf8",
    maxBuffer: 512 << 20,
  });
}

function pulumiOn(backend: string, plan: MovePlan) {
  return (args: string[], what: string): string => {
    const r = pulumiAt(backend, plan.projectDir, plan.env ?? process.env, args);
    if (r.error) throw r.error;
    if (r.status !== 0)
      throw new Error(
        `${what} on ${shownUrl(backend)} failed (pulumi ${args.join(" ")} exited ${r.status}): ${r.stderr.trim()}`,
      );
    return r.stdout;
  };
}

/**
 * What must be the same on both sides: each resource by URN, its type, id, parent, inputs and
 * outputs (stack-state.ts reads the export; the backend's timestamps are not the resource).
 */
function comparable(exportText: string): Map<string, unknown> {
  const byUrn = new Map<string, unknown>();
  for (const r of readState(exportText).resources) {
    if (byUrn.has(r.urn)) throw new Error(`the export holds ${r.urn} twice`);
    byUrn.set(r.urn, [r.type, r.id, r.parent, r.inputs, r.outputs]);
  }
  return byUrn;
}

function countSecrets(v: unknown): number {
  if (isSecret(v)) return 1;
  if (Array.isArray(v)) return v.reduce<number>((n, x) => n + countSecrets(x), 0);
  if (typeof v !== "object" || v === null) return 0;
  return Object.values(v).reduce<number>((n, x) => n + countSecrets(x), 0);
}

/** The differences between two exports (--show-secrets), named by URN; empty when none. */
export function exportDifferences(before: string, after: string): string[] {
  const a = comparable(before);
  const b = comparable(after);
  const diffs: string[] = [];
  for (const [urn, r] of a) {
    const other = b.get(urn);
    if (!other) diffs.push(`${urn} is missing`);
    else if (!isDeepStrictEqual(r, other)) diffs.push(`${urn} differs`);
  }
  for (const urn of b.keys()) if (!a.has(urn)) diffs.push(`${urn} was not there before`);
  return diffs;
}

/**
 * Moves `plan.stack` to `plan.to`. Throws, leaving the source as it was, when the destination
 * already has the stack, when the import fails, or when what arrived differs from what left.
 */
export function moveStack(plan: MovePlan): MoveResult {
  const say = plan.say ?? (() => {});
  const from = pulumiOn(plan.from, plan);
  const to = pulumiOn(plan.to, plan);
  const s = ["-s", plan.stack];
  const exported = from(["stack", "export", ...s], "reading the stack");
  // Decrypts every secret: a passphrase that cannot is found here, before anything moves.
  const plainBefore = from(["stack", "export", "--show-secrets", ...s], "decrypting the stack");
  const resources = comparable(plainBefore).size;
  const secrets = countSecrets(readState(exported).resources.map((r) => [r.inputs, r.outputs]));
  say(`${plan.stack} on ${shownUrl(plan.from)}: ${resources} resources, ${secrets} secrets`);

  const there = JSON.parse(to(["stack", "ls", "--json"], "listing stacks")) as Array<{
    name: string;
  }>;
  if (there.some((x) => x.name.split("/").pop() === plan.stack))
    throw new Error(
      `${shownUrl(plan.to)} already has a stack ${plan.stack}: moving onto it would overwrite ` +
        `someone's state. If it is this stack moved before, log in to it instead ` +
        `(\`sparkform team login <url>\`); otherwise choose another backend or remove that stack ` +
        `there first (\`pulumi stack rm ${plan.stack}\` with PULUMI_BACKEND_URL set to it).`,
    );

  const dir = path.join(stateDir(), "team");
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const backup = path.join(
    dir,
    `${plan.stack}-${new Date().toISOString().replace(/[:.]/g, "-")}.json`,
  );
  fs.writeFileSync(backup, exported, { mode: 0o600 });

  // The stack's config file keeps its encryptionsalt: `stack init` reuses it, so the same
  // passphrase decrypts on the new backend.
  to(
    ["stack", "init", plan.stack, "--secrets-provider", "passphrase", "--no-select"],
    "making the stack",
  );
  try {
    to(["stack", "import", ...s, "--file", backup], "importing the state");
    const plainAfter = to(["stack", "export", "--show-secrets", ...s], "reading it back");
    const diffs = exportDifferences(plainBefore, plainAfter);
    if (diffs.length > 0)
      throw new Error(
        `the state on ${shownUrl(plan.to)} is not the state that left: ${diffs.slice(0, 5).join("; ")}`,
      );
    const outputs = parseOutputsRecord(
      from(["stack", "output", "--json", "--show-secrets", ...s], "reading the outputs"),
      plan.stack,
    );
    const outputsAfter = parseOutputsRecord(
      to(["stack", "output", "--json", "--show-secrets", ...s], "reading the outputs back"),
      plan.stack,
    );
    if (!isDeepStrictEqual(outputs, outputsAfter))
      throw new Error(`the stack's outputs on ${shownUrl(plan.to)} differ from the source's`);
    say(
      `${plan.stack} on ${shownUrl(plan.to)}: the same ${resources} resources, ` +
        `${Object.keys(outputs).length} outputs and ${secrets} secrets`,
    );
    // Two copies of one cluster's state would let two `up`s fight over the nodes: the source's
    // goes (its export stays in the backup), its config file stays.
    from(["stack", "rm", ...s, "--yes", "--force", "--preserve-config"], "removing the old copy");
    return {
      resources,
      outputs: Object.keys(outputs).length,
      secrets,
      backup,
    };
  } catch (err) {
    // The destination's half: removed, so the move can be run again; the source is untouched.
    pulumiAt(plan.to, plan.projectDir, plan.env ?? process.env, [
      "stack",
      "rm",
      ...s,
      "--yes",
      "--force",
      "--preserve-config",
    ]);
    throw err;
  }
}
