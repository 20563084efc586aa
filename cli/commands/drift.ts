// `sparkform drift --stack S`: one drift check between commands (cli/drift/check.ts), with its
// verdict as lines or JSON and its exit status (0 clean, 1 drift, 2 could not check); with
// --metrics-dir, the node_exporter textfile of the pinned metric contract (cli/drift/metrics.ts);
// with --install/--uninstall, the check on a systemd user timer (cli/drift/timer.ts).
import * as fs from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { repoRoot, stateDir } from "../../setup/pulumi/env";
import { stackName, upTargets } from "../engine";
import { out, UsageError } from "../errors";
import { projectRoot, readExport, readStack } from "../stack";
import { checkDrift, type CheckResult, exitCodeOf } from "../drift/check";
import {
  previousTextfile,
  renderMetrics,
  repairsFrom,
  type UnitReading,
  writeTextfile,
} from "../drift/metrics";
import { driftJson, driftLines, durationOf, repairLines } from "../drift/report";
import { countRepairs, type RepairOutcome, repairSafe } from "../drift/repair";
import type { DriftedResource } from "../drift/preview";
import {
  DEFAULT_INTERVAL,
  type DriftInvocation,
  install,
  parseInterval,
  uninstall,
} from "../drift/timer";
import { readUnits, recordedUnits } from "../drift/units";

export const usage = `usage: sparkform drift [--stack S] [--json] [--metrics-dir DIR] [--repair safe]
       sparkform drift [--stack S] --metrics-dir DIR [--repair safe] --install [--interval 5m]
       sparkform drift [--stack S] --uninstall
  One check that the stack's nodes are as its state says: \`pulumi preview --refresh
  --expect-no-changes\`, which takes no lock and writes no state. Skipped while an operator's
  \`up\` holds the stack's lock. Exit 0 clean, 1 drift, 2 could not check (locked, a node
  unreachable, an error).
  --stack S          the stack (default: the selected one)
  --json             one JSON object: stack, verdict, checkedAt, durationSeconds, resources
  --metrics-dir DIR  also write DIR/sparkform-<stack>.prom for node_exporter's textfile
                     collector (the check's verdict and each sparkform unit's state)
  --repair safe      when every drifted resource is in the safe set (a unit stopped or crashed,
                     a guard stopped, a tampered installed binary, a damaged model file), run a
                     targeted \`up --refresh\` of them behind the policy gate; never on a config
                     change, changed node facts, a degraded link or a locked stack
  --install          run this check on a systemd user timer of this host (needs --metrics-dir);
                     prints the cron line for a host without systemd
  --interval I       with --install: every I (${DEFAULT_INTERVAL} default; 1m..30m dividing an hour, 1h..12h a day)
  --uninstall        stop the timer and remove exactly the files --install wrote`;

/** Settings of this shell the timer's check needs to find the same stack (never a secret). */
const CARRIED = [
  "PULUMI_BACKEND_URL",
  "PULUMI_HOME",
  "PULUMI_CONFIG_PASSPHRASE_FILE",
  "SPARKFORM_STATE_DIR",
  "SPARKFORM_PROJECT_DIR",
];

function invocation(stack: string, metricsDir: string, repair: boolean): DriftInvocation {
  const env: Record<string, string> = {};
  for (const k of CARRIED) {
    const v = process.env[k];
    if (v) env[k] = v;
  }
  return {
    stack,
    metricsDir: path.resolve(metricsDir),
    node: process.execPath,
    cli: path.join(repoRoot, "bin", "sparkform.js"),
    env,
    ...(repair ? { repairSafe: true } : {}),
  };
}

function installTimer(
  stack: string,
  metricsDir: string,
  intervalText: string,
  repair: boolean,
): number {
  const interval = parseInterval(intervalText);
  const i = invocation(stack, metricsDir, repair);
  const log = path.join(stateDir(), "drift", `${stack}.log`);
  const r = install(i, interval, { log });
  out(`wrote ${r.files.join(" and ")}`);
  out(
    r.enabled === true
      ? `enabled: sparkform-drift-${stack}.timer checks stack ${stack} every ${interval.text} ` +
          `(\`systemctl --user list-timers\` shows the next run; \`journalctl --user -u sparkform-drift-${stack}\` the verdicts)`
      : `not enabled: ${r.enabled}. Enable it where a user manager runs ` +
          `(\`systemctl --user enable --now sparkform-drift-${stack}.timer\`; \`loginctl enable-linger\` ` +
          "keeps it running without a login), or use the cron line below",
  );
  out("for a host without systemd, this crontab line (`crontab -e`) runs the same check:");
  out(r.cron);
  if (!process.env.PULUMI_CONFIG_PASSPHRASE_FILE && process.env.PULUMI_CONFIG_PASSPHRASE)
    out(
      "note: PULUMI_CONFIG_PASSPHRASE is set in this shell and is not written into the unit: " +
        "the timer's check reads the passphrase from PULUMI_CONFIG_PASSPHRASE_FILE (set it and run --install again)",
    );
  return 0;
}

/**
 * The units' rows of the textfile. A node that does not answer, or a stack whose state cannot
 * be read, costs only those rows: the verdict still goes out, and the preview's own reading
 * reports the node.
 */
async function unitRows(stack: string): Promise<UnitReading[]> {
  const warn = (what: string, message: string) =>
    process.stderr.write(
      `sparkform drift: ${what} (${message.split("\n")[0]}); the textfile has no sparkform_unit_* ` +
        "rows for it this time\n",
    );
  try {
    const view = readStack(stack);
    const units = recordedUnits(
      readExport(stack, projectRoot()),
      view.config.nodes.map((n) => n.name),
    );
    const { readings, failures } = await readUnits(units, (node) => view.target(node));
    for (const f of failures) warn(`the units on ${f.node} were not read`, f.message);
    return readings;
  } catch (err) {
    warn("the units' state was not read", (err as Error).message);
    return [];
  }
}

function checkMetricsDir(dir: string): void {
  if (!fs.statSync(dir, { throwIfNoEntry: false })?.isDirectory())
    throw new UsageError(
      `--metrics-dir ${dir} is not a directory: create it, or give node_exporter's ` +
        "--collector.textfile.directory",
    );
}

async function writeMetrics(
  r: CheckResult,
  dir: string,
  repaired: readonly DriftedResource[],
): Promise<string> {
  const units = await unitRows(r.stack);
  const text = await renderMetrics({
    stack: r.stack,
    endedAt: Math.round(r.endedAt.getTime() / 1000),
    durationSeconds: durationOf(r),
    ...(r.skipped ? { skipped: r.skipped.reason } : {}),
    seen: r.seen,
    drifted: r.drifted,
    repairs: countRepairs(repairsFrom(previousTextfile(dir, r.stack), r.stack), repaired),
    units,
  });
  return writeTextfile(dir, r.stack, text);
}

export async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      stack: { type: "string" },
      json: { type: "boolean" },
      "metrics-dir": { type: "string" },
      install: { type: "boolean" },
      interval: { type: "string" },
      uninstall: { type: "boolean" },
      repair: { type: "string" },
    },
  });
  if (values.repair !== undefined && values.repair !== "safe")
    throw new UsageError(
      `--repair ${JSON.stringify(values.repair)}: the only repair is \`--repair safe\` (the safe set; ` +
        "anything else is an operator's `up`)",
    );
  const repair = values.repair === "safe";
  const metricsDir = values["metrics-dir"];
  if (values.install && values.uninstall)
    throw new UsageError("give --install or --uninstall, not both");
  if (values.interval !== undefined && !values.install)
    throw new UsageError(
      "--interval goes with --install (the timer's period); drop it, or add --install",
    );
  if (values.install && metricsDir === undefined)
    throw new UsageError(
      "--install needs --metrics-dir DIR: the timer's checks report through the textfile " +
        "(e.g. --metrics-dir /var/lib/prometheus/node-exporter)",
    );
  if (metricsDir !== undefined) checkMetricsDir(metricsDir);
  const stack = stackName(values.stack);
  if (values.install)
    return installTimer(stack, metricsDir as string, values.interval ?? DEFAULT_INTERVAL, repair);
  if (values.uninstall) {
    const r = uninstall(stack);
    out(
      r.removed.length > 0
        ? `removed ${r.removed.join(" and ")}`
        : `nothing to remove: no timer of stack ${stack} was installed by \`sparkform drift --install\``,
    );
    for (const f of r.kept)
      out(`kept ${f}: it changed since --install wrote it; remove it yourself if it should go`);
    return 0;
  }

  const result = await checkDrift({
    stack,
    projectDir: projectRoot(),
    nodes: () => readStack(stack).config.nodes.map((n) => n.name),
  });
  let outcome: RepairOutcome | undefined;
  let repaired: readonly DriftedResource[] = [];
  if (repair && result.verdict === "drift") {
    // The engine's progress goes to stderr under --json, so stdout stays one object.
    ({ outcome, repaired } = repairSafe(result.drifted, (urns) =>
      upTargets(stack, urns, { refresh: true, toStderr: values.json === true }),
    ));
  }
  const file =
    metricsDir !== undefined ? await writeMetrics(result, metricsDir, repaired) : undefined;
  if (values.json) out(JSON.stringify(driftJson(result, outcome), null, 2));
  else {
    out([...driftLines(result), ...(outcome ? repairLines(outcome) : [])].join("\n"));
    if (file) out(`metrics: ${file}`);
  }
  return exitCodeOf(result);
}
