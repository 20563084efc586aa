// One drift check of a stack: is the stack as its nodes are? It never takes the stack's lock
// and never writes state: the pulumi CLI's `preview --refresh --expect-no-changes --json` reads
// every resource again and compares, in memory, and the file backend's state is not touched.
// Because a preview takes no lock, a preview during an operator's `up` would compare the
// program with half-written state: so the check looks for a lock first and, when there is one,
// skips (never "drift").
import { spawn } from "node:child_process";
import { pulumiBinary, pulumiEnv } from "../../setup/pulumi/env";
import { project } from "../stack-cache";
import { currentBackend } from "../team/backend";
import { backendLocks, lockedReason } from "./lock";
import type { SkipReason } from "./metrics";
import { type DriftedResource, readPreview, type SeenResource } from "./preview";

export interface CheckResult {
  readonly stack: string;
  readonly verdict: "clean" | "drift" | "skipped" | "error";
  readonly startedAt: Date;
  readonly endedAt: Date;
  readonly seen: readonly SeenResource[];
  readonly drifted: readonly DriftedResource[];
  /** Why it could not check: the metrics' reason, and the words for a person. */
  readonly skipped?: { readonly reason: SkipReason; readonly detail: string };
}

/** Exit status of a check: 0 clean, 1 drift, 2 could not check. */
export function exitCodeOf(r: Pick<CheckResult, "verdict">): number {
  return r.verdict === "clean" ? 0 : r.verdict === "drift" ? 1 : 2;
}

/**
 * The `pulumi` argv of the check (its flags are what make it lock-free and state-free); without
 * `refresh`, the preview that reads no node: what it would change is the program's own change.
 */
export function previewArgs(stack: string, refresh = true): string[] {
  return [
    "preview",
    ...(refresh ? ["--refresh"] : []),
    "--expect-no-changes",
    "--json",
    "--non-interactive",
    "--stack",
    stack,
  ];
}

/**
 * The node a failed refresh could not reach, from the transport's own words (components/
 * transport/errors.ts: `[NODE] step "…" could not connect to …`, `… stalled: …`, `… timed out …`).
 */
export function unreachableNode(output: string): { node: string; line: string } | undefined {
  const m =
    /\[([^\]\s]+)\] step "[^"]*" (could not connect to [^\n]*|stalled: [^\n]*|timed out after [^\n]*)/.exec(
      output,
    );
  return m ? { node: m[1] as string, line: m[0] } : undefined;
}

interface Diagnostic {
  readonly message?: string;
  readonly severity?: string;
}

function errorDiagnostics(preview: unknown): string[] {
  const d = (preview as { diagnostics?: unknown } | null)?.diagnostics;
  return Array.isArray(d)
    ? (d as Diagnostic[])
        .filter((x) => x.severity === "error" && typeof x.message === "string")
        .map((x) => (x.message as string).trim())
    : [];
}

const EXPECTED_NO_CHANGES = /no changes were expected/;

/**
 * The verdict of a preview's exit code, stdout (its JSON) and stderr. Pure: the unit tests feed
 * it a real preview's output.
 */
export function verdictOf(
  out: { code: number | null; stdout: string; stderr: string },
  nodes: readonly string[],
): Pick<CheckResult, "verdict" | "seen" | "drifted" | "skipped"> {
  let preview: unknown;
  try {
    preview = JSON.parse(out.stdout);
  } catch {
    preview = undefined;
  }
  const errors = [
    ...errorDiagnostics(preview),
    ...out.stderr
      .split("\n")
      .filter((l) => /^error:/.test(l.trim()) && !EXPECTED_NO_CHANGES.test(l)),
  ];
  const cannot = (reason: SkipReason, detail: string) => ({
    verdict: reason === "error" ? ("error" as const) : ("skipped" as const),
    seen: [],
    drifted: [],
    skipped: { reason, detail },
  });
  const all = `${errors.join("\n")}\n${out.stderr}`;
  const gone = unreachableNode(all);
  if (gone)
    return cannot(
      "unreachable",
      `could not check: node ${gone.node} is unreachable (${gone.line})`,
    );
  if (
    preview === undefined ||
    errors.length > 0 ||
    (out.code !== 0 && !EXPECTED_NO_CHANGES.test(out.stderr))
  ) {
    const why =
      errors[0] ?? (out.stderr.trim().split("\n").slice(-3).join(" ") || `exit ${out.code}`);
    return cannot("error", `could not check: pulumi preview failed: ${why}`);
  }
  const r = readPreview(preview, nodes);
  return { verdict: r.drifted.length > 0 ? "drift" : "clean", seen: r.seen, drifted: r.drifted };
}

/**
 * The drifted resources with `inputsChanged` as a preview that reads no node says (`plain`, its
 * exit code, stdout and stderr): what it would change is what the program now gives differently
 * from what state recorded (a config change, an upgrade's new inputs). An input that changed in
 * the refreshed preview only because another drifted resource's outputs did (a worker's build
 * from a NativeBuild whose artifact the refresh read missing) is not among them. A plain preview
 * that gives no verdict leaves every drifted resource as the refreshed preview judged it.
 */
export function withConfigChanges(
  drifted: readonly DriftedResource[],
  plain: { code: number | null; stdout: string; stderr: string },
  nodes: readonly string[],
): DriftedResource[] {
  const v = verdictOf(plain, nodes);
  if (v.verdict !== "clean" && v.verdict !== "drift") return [...drifted];
  const config = new Map(
    v.drifted.map((d) => [d.urn, d.inputsChanged.length > 0 ? d.inputsChanged : d.keys]),
  );
  return drifted.map((d) => ({ ...d, inputsChanged: config.get(d.urn) ?? [] }));
}

function runPreview(
  stack: string,
  projectDir: string,
  refresh = true,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(pulumiBinary(), previewArgs(stack, refresh), {
      cwd: projectDir,
      env: pulumiEnv(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on("data", (b: Buffer) => stdout.push(b));
    child.stderr.on("data", (b: Buffer) => stderr.push(b));
    child.on("error", reject);
    child.on("close", (code) =>
      resolve({
        code,
        stdout: Buffer.concat(stdout).toString("utf8"),
        stderr: Buffer.concat(stderr).toString("utf8"),
      }),
    );
  });
}

/**
 * Check `stack` of the Pulumi project in `projectDir`; `nodes` are its node names (for resources
 * whose target is secret). Never throws for a stack it cannot check: that is a verdict.
 */
export async function checkDrift(o: {
  stack: string;
  projectDir: string;
  nodes: () => readonly string[];
}): Promise<CheckResult> {
  const startedAt = new Date();
  const done = (r: Pick<CheckResult, "verdict" | "seen" | "drifted" | "skipped">): CheckResult => ({
    stack: o.stack,
    startedAt,
    endedAt: new Date(),
    ...r,
  });
  const p = project(o.projectDir);
  const backend = currentBackend();
  const locked = async () => {
    const lock = p ? (await backendLocks(backend, p.name, o.stack))[0] : undefined;
    return lock
      ? done({
          verdict: "skipped",
          seen: [],
          drifted: [],
          skipped: { reason: "locked", detail: `skipped: ${lockedReason(lock)}` },
        })
      : undefined;
  };
  try {
    const before = await locked();
    if (before) return before;
    const nodes = o.nodes();
    const preview = await runPreview(o.stack, o.projectDir);
    const v = verdictOf(preview, nodes);
    // Which of the drift is the program's own (never repaired): the preview that reads no node.
    const drifted =
      v.verdict === "drift"
        ? withConfigChanges(v.drifted, await runPreview(o.stack, o.projectDir, false), nodes)
        : v.drifted;
    // An `up` that started during the preview is not blocked by it, and what the preview read
    // of its half-written state is no verdict: the lock it holds now says so.
    return (await locked()) ?? done({ ...v, drifted });
  } catch (err) {
    return done({
      verdict: "error",
      seen: [],
      drifted: [],
      skipped: { reason: "error", detail: `could not check: ${(err as Error).message}` },
    });
  }
}
