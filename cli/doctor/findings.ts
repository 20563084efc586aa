// What `sparkform doctor` reports: one finding per check and place, each saying what it saw and,
// when it is not a pass, the fix. Pure: rendering and the exit code are computed from the list.
import { columns } from "../summary";

/** pass: fine. warn: works, but not as well as it should (or later steps will ask). fail: stops `up`. skip: could not be judged here. */
export type Status = "pass" | "warn" | "fail" | "skip";

export interface Finding {
  /** The check's id (`ssh`, `host-key`, `disk`, …): stable, for tests and scripts. */
  readonly check: string;
  /** `control node`, `config`, a node's name, or `spark-1↔spark-2 rail 0`. */
  readonly where: string;
  readonly status: Status;
  /** What was seen, in one line. */
  readonly what: string;
  /** What to do (given for every warn and fail). */
  readonly fix?: string;
}

/** Exit codes: 0 every finding passed (or was skipped), 1 warnings only, 2 any failure. */
export const EXIT = { pass: 0, warn: 1, fail: 2 } as const;

export function exitCode(findings: readonly Finding[]): number {
  if (findings.some((f) => f.status === "fail")) return EXIT.fail;
  if (findings.some((f) => f.status === "warn")) return EXIT.warn;
  return EXIT.pass;
}

const MARK: Record<Status, string> = { pass: "ok", warn: "WARN", fail: "FAIL", skip: "skip" };

/** The report: one aligned line per finding, its fix indented under it, then the verdict. */
export function renderFindings(findings: readonly Finding[], elapsedMs?: number): string[] {
  const lines: string[] = [];
  const rows = findings.map((f) => [MARK[f.status], f.where, f.check, f.what]);
  const rendered = columns(rows, "");
  findings.forEach((f, i) => {
    lines.push(rendered[i] ?? "");
    if (f.fix && f.status !== "pass") lines.push(`      fix: ${f.fix}`);
  });
  const count = (s: Status) => findings.filter((f) => f.status === s).length;
  const verdict =
    exitCode(findings) === EXIT.fail ? "FAIL" : exitCode(findings) === EXIT.warn ? "WARN" : "PASS";
  lines.push(
    "",
    `doctor: ${verdict}: ${count("pass")} ok, ${count("warn")} warnings, ${count("fail")} failures` +
      `${count("skip") ? `, ${count("skip")} skipped` : ""}` +
      `${elapsedMs === undefined ? "" : ` in ${(elapsedMs / 1000).toFixed(1)} s`}` +
      ` (exit ${exitCode(findings)})`,
  );
  return lines;
}
