// `sparkform drift --install`: the check on a timer of the control host's systemd user manager
// (a service that runs one check and a timer that starts it), or, where there is no systemd,
// the cron line that does the same. The files' text is built by pure functions (tested), and
// what --install wrote is recorded with each file's digest, so --uninstall removes exactly
// those files, and none that someone changed or wrote by hand since.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { childEnv, shQuote } from "../../components/transport";
import { UsageError } from "../errors";

/** A check interval: every N minutes (N divides an hour) or every N hours (N divides a day). */
export interface Interval {
  readonly unit: "m" | "h";
  readonly n: number;
  /** As given (`5m`). */
  readonly text: string;
}

export const DEFAULT_INTERVAL = "5m";

/** `5m`, `15m`, `1h`, …, or a UsageError naming the flag and what it takes. */
export function parseInterval(text: string): Interval {
  const m = /^([1-9][0-9]*)(m|h)$/.exec(text);
  const n = m ? Number(m[1]) : 0;
  const unit = m?.[2] as "m" | "h" | undefined;
  // The same schedule as a systemd calendar and a crontab: both need the step to divide the
  // hour (minutes) or the day (hours), or the last run of each hour/day comes early.
  if (!unit || (unit === "m" ? 60 % n !== 0 || n === 60 : 24 % n !== 0 || n === 24)) {
    throw new UsageError(
      `--interval ${JSON.stringify(text)} is not an interval this check can keep: give minutes ` +
        "that divide an hour (1m, 2m, 5m, 10m, 15m, 20m, 30m) or hours that divide a day " +
        "(1h, 2h, 3h, 4h, 6h, 8h, 12h); the default is 5m",
    );
  }
  return { unit, n, text };
}

const seconds = (i: Interval) => i.n * (i.unit === "m" ? 60 : 3600);

/** What the service runs: this checkout's CLI, with the node that runs this one. */
export interface DriftInvocation {
  readonly stack: string;
  readonly metricsDir: string;
  /** The node executable (process.execPath). */
  readonly node: string;
  /** bin/sparkform.js of this checkout. */
  readonly cli: string;
  /** Settings the check needs that the user manager's environment lacks (backend, state). */
  readonly env: Readonly<Record<string, string>>;
  /** Each check also runs `--repair safe`. */
  readonly repairSafe?: boolean;
}

/**
 * One word of a systemd ExecStart=/Environment= line: double-quoted, with `\` and `"` escaped,
 * and `%` (a specifier) and `$` (a variable) doubled, so a path with spaces or either sign is
 * passed as it is.
 */
export function systemdQuote(word: string): string {
  if (/[\n\r\0]/.test(word))
    throw new Error(
      `${JSON.stringify(word)} holds a line break or NUL, which a unit file cannot carry: move ` +
        "the checkout or the metrics directory to a path without one",
    );
  const escaped = word
    .replace(/\\/g, "\\\\")
    .replace(/"/g, '\\"')
    .replace(/%/g, "%%")
    .replace(/\$/g, "$$$$");
  return `"${escaped}"`;
}

const argv = (i: DriftInvocation) => [
  i.node,
  i.cli,
  "drift",
  "--stack",
  i.stack,
  "--metrics-dir",
  i.metricsDir,
  ...(i.repairSafe ? ["--repair", "safe"] : []),
];

export const unitBase = (stack: string): string => `sparkform-drift-${stack}`;

/** The service unit: one check, its verdict in the journal, its metrics in the textfile. */
export function serviceUnit(i: DriftInvocation): string {
  return [
    "[Unit]",
    `Description=sparkform drift check of stack ${i.stack} (written by sparkform drift --install)`,
    "",
    "[Service]",
    "Type=oneshot",
    ...Object.entries(i.env).map(([k, v]) => `Environment=${systemdQuote(`${k}=${v}`)}`),
    `ExecStart=${argv(i).map(systemdQuote).join(" ")}`,
    // Exit 1 (drift) and 2 (could not check) are verdicts the textfile carries, not a failed
    // unit: the alert rules read the metrics, and a failed unit would only add noise.
    "SuccessExitStatus=1 2",
    "",
  ].join("\n");
}

/** The timer: every interval on the clock, spread by a random delay, caught up after a sleep. */
export function timerUnit(stack: string, interval: Interval): string {
  const calendar =
    interval.unit === "m" ? `*-*-* *:00/${interval.n}:00` : `*-*-* 00/${interval.n}:00:00`;
  // A fifth of the interval, at most 5 minutes: several stacks (or hosts) do not all start
  // their previews in the same second, and each check still lands well inside its interval.
  const delay = Math.min(Math.floor(seconds(interval) / 5), 300);
  return [
    "[Unit]",
    `Description=sparkform drift check of stack ${stack} every ${interval.text}`,
    "",
    "[Timer]",
    `OnCalendar=${calendar}`,
    `RandomizedDelaySec=${delay}`,
    // A check missed while the host slept or was off runs at the next boot.
    "Persistent=true",
    `Unit=${unitBase(stack)}.service`,
    "",
    "[Install]",
    "WantedBy=timers.target",
    "",
  ].join("\n");
}

/** A crontab line that runs the same check where there is no systemd user manager. */
export function cronLine(i: DriftInvocation, interval: Interval, log: string): string {
  const schedule = interval.unit === "m" ? `*/${interval.n} * * * *` : `0 */${interval.n} * * *`;
  const env = Object.entries(i.env).map(([k, v]) => `${k}=${shQuote(v)}`);
  const command = [...env, ...argv(i).map(shQuote)].join(" ");
  // cron turns an unescaped % into a line break.
  return `${schedule} ${command} >>${shQuote(log)} 2>&1`.replace(/%/g, "\\%");
}

/** The user's configuration directory: $XDG_CONFIG_HOME, else ~/.config (of `home` when given). */
function configDir(home: string | undefined): string {
  if (home !== undefined) return path.join(home, ".config");
  return process.env.XDG_CONFIG_HOME || path.join(os.homedir(), ".config");
}

/** Where the user manager reads the user's units. */
export function userUnitDir(home?: string): string {
  return path.join(configDir(home), "systemd", "user");
}

/** Where --install records what it wrote (outside the unit directory: it is no unit). */
function recordFile(stack: string, home: string | undefined): string {
  return path.join(configDir(home), "sparkform", `${unitBase(stack)}.installed.json`);
}

interface Written {
  readonly file: string;
  readonly sha256: string;
}

const sha256 = (text: string) => createHash("sha256").update(text).digest("hex");

function readRecord(file: string): Written[] {
  try {
    const v = JSON.parse(fs.readFileSync(file, "utf8")) as { files?: unknown };
    return Array.isArray(v.files)
      ? v.files.filter(
          (f): f is Written =>
            typeof f === "object" &&
            f !== null &&
            typeof (f as Written).file === "string" &&
            typeof (f as Written).sha256 === "string",
        )
      : [];
  } catch {
    return [];
  }
}

function digestOf(file: string): string | undefined {
  try {
    return sha256(fs.readFileSync(file, "utf8"));
  } catch {
    return undefined;
  }
}

/** How the user manager is asked (injected by the tests; systemctl --user here). */
export type Systemctl = (args: readonly string[]) => { ok: boolean; output: string };

export const systemctl: Systemctl = (args) => {
  const r = spawnSync("systemctl", ["--user", ...args], {
    encoding: "utf8",
    env: childEnv({ pass: ["XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"] }),
  });
  return {
    ok: !r.error && r.status === 0,
    output: (r.error ? r.error.message : `${r.stdout}${r.stderr}`).trim(),
  };
};

export interface InstallResult {
  readonly files: readonly string[];
  /** Whether the timer is enabled and started; else why not. */
  readonly enabled: true | string;
  readonly cron: string;
}

/**
 * Write the service and the timer of `i` for `interval`, record them, and enable the timer when
 * a user manager answers. A unit file of that name that --install did not write (or that was
 * changed since) is left alone: the install stops and says so.
 */
export function install(
  i: DriftInvocation,
  interval: Interval,
  o: { home?: string; systemctl?: Systemctl; log: string },
): InstallResult {
  const dir = userUnitDir(o.home);
  const record = recordFile(i.stack, o.home);
  const ours = new Map(readRecord(record).map((w) => [w.file, w.sha256]));
  const files: [string, string][] = [
    [path.join(dir, `${unitBase(i.stack)}.service`), serviceUnit(i)],
    [path.join(dir, `${unitBase(i.stack)}.timer`), timerUnit(i.stack, interval)],
  ];
  for (const [file] of files) {
    const now = digestOf(file);
    if (now !== undefined && ours.get(file) !== now) {
      throw new Error(
        `${file} exists and was not written by \`sparkform drift --install\` (or was changed ` +
          "since): it is left as it is. Move it away (or `systemctl --user disable --now` and " +
          "remove it yourself) if the drift check should own it, then run --install again",
      );
    }
  }
  fs.mkdirSync(dir, { recursive: true });
  fs.mkdirSync(path.dirname(record), { recursive: true });
  const written: Written[] = [];
  for (const [file, text] of files) {
    fs.writeFileSync(file, text, { mode: 0o644 });
    written.push({ file, sha256: sha256(text) });
    // Recorded after each file, so an install cut off halfway can still be undone.
    fs.writeFileSync(record, `${JSON.stringify({ files: written }, null, 2)}\n`);
  }
  const run = o.systemctl ?? systemctl;
  const timer = `${unitBase(i.stack)}.timer`;
  const reload = run(["daemon-reload"]);
  const enable = reload.ok ? run(["enable", "--now", timer]) : reload;
  return {
    files: written.map((w) => w.file),
    enabled: enable.ok
      ? true
      : `no systemd user manager answered (${enable.output.split("\n")[0] || "systemctl --user failed"})`,
    cron: cronLine(i, interval, o.log),
  };
}

export interface UninstallResult {
  readonly removed: readonly string[];
  /** Recorded files left in place: changed since --install wrote them. */
  readonly kept: readonly string[];
}

/** Stop the timer and remove exactly the files --install recorded for `stack`, unchanged ones. */
export function uninstall(
  stack: string,
  o: { home?: string; systemctl?: Systemctl } = {},
): UninstallResult {
  const record = recordFile(stack, o.home);
  const written = readRecord(record);
  const run = o.systemctl ?? systemctl;
  if (written.length > 0) run(["disable", "--now", `${unitBase(stack)}.timer`]);
  const removed: string[] = [];
  const kept: string[] = [];
  for (const w of written) {
    const now = digestOf(w.file);
    if (now === undefined) continue;
    if (now === w.sha256) {
      fs.rmSync(w.file);
      removed.push(w.file);
    } else kept.push(w.file);
  }
  fs.rmSync(record, { force: true });
  if (written.length > 0) run(["daemon-reload"]);
  return { removed, kept };
}
