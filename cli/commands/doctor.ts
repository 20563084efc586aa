// `sparkform doctor [--stack S]`: the preflight before `up`, and the first thing to run when
// something is wrong. Read-only; exit 0 pass, 1 warnings, 2 failures (cli/doctor/).
import { parseArgs } from "node:util";
import { doctor, exitCode, renderFindings } from "../doctor";
import { out } from "../errors";

export const summary = "preflight: control node, backend, config, policies, every node (read-only)";
export const usage = `usage: sparkform doctor [--stack S] [--json]
  --stack S   the stack (default: the selected one)
  --json      the findings as JSON
checks: Node.js, pulumi (or Go), ssh, rsync, python3, an ssh agent when nodes copy from each
other; the stack's backend (on PostgreSQL: reachable, its table, TLS off this machine) and that
the passphrase decrypts the stack, stopping there when either fails; the config schema and the policy pack's checks; per node (all at once, ${"3"} s connect
timeout): reachable with the pinned host key, clock skew, linger, sparkform's ports free or
held by its own units, disk for the model, the fabric's port checks.
exit: 0 every check passed, 1 warnings only, 2 a failure (or a usage error)`;

export async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: { stack: { type: "string" }, json: { type: "boolean" } },
  });
  const started = Date.now();
  const findings = await doctor(values.stack ? { stack: values.stack } : {});
  out(
    values.json
      ? JSON.stringify(findings, null, 2)
      : renderFindings(findings, Date.now() - started).join("\n"),
  );
  return exitCode(findings);
}
