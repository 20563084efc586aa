// `sparkform drift --install`/`--uninstall` in a temporary HOME: the unit files' text (a pure
// function each, with paths that hold spaces, % and $), the cron line, the interval's grammar,
// and that --uninstall removes exactly what --install wrote: never a file it did not write or
// one changed since.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeEach, describe, expect, it } from "vitest";
import {
  cronLine,
  type DriftInvocation,
  install,
  parseInterval,
  serviceUnit,
  type Systemctl,
  systemdQuote,
  timerUnit,
  uninstall,
  userUnitDir,
} from "../../cli/drift/timer";
import { repoRoot } from "../../setup/pulumi/env";
import { optionalOrSkip } from "../support/requires";

const work = fs.mkdtempSync(path.join(os.tmpdir(), "drift-timer-"));
afterAll(() => fs.rmSync(work, { recursive: true, force: true }));

const inv: DriftInvocation = {
  stack: "local",
  metricsDir: "/var/lib/node exporter/100%",
  node: "/usr/bin/node",
  cli: "/home/ops/my checkout/bin/sparkform.js",
  env: { PULUMI_BACKEND_URL: "file:///home/ops/my checkout/.sparkform/backend" },
};

describe("the unit files' text", () => {
  it("the service runs this checkout's check of the stack into the metrics dir, quoted for systemd", () => {
    expect(serviceUnit(inv)).toBe(
      [
        "[Unit]",
        "Description=sparkform drift check of stack local (written by sparkform drift --install)",
        "",
        "[Service]",
        "Type=oneshot",
        'Environment="PULUMI_BACKEND_URL=file:///home/ops/my checkout/.sparkform/backend"',
        'ExecStart="/usr/bin/node" "/home/ops/my checkout/bin/sparkform.js" "drift" "--stack" "local" "--metrics-dir" "/var/lib/node exporter/100%%"',
        "SuccessExitStatus=1 2",
        "",
      ].join("\n"),
    );
    expect(systemdQuote('a"b\\c$d%e')).toBe('"a\\"b\\\\c$$d%%e"');
    expect(serviceUnit({ ...inv, env: {}, repairSafe: true })).toContain(
      '"--metrics-dir" "/var/lib/node exporter/100%%" "--repair" "safe"\n',
    );
    expect(() => systemdQuote("a\nb")).toThrow(/line break or NUL.*move the checkout/);
  });

  it("the timer: on the clock every interval, a randomized delay, Persistent=true", () => {
    expect(timerUnit("local", parseInterval("5m"))).toBe(
      [
        "[Unit]",
        "Description=sparkform drift check of stack local every 5m",
        "",
        "[Timer]",
        "OnCalendar=*-*-* *:00/5:00",
        "RandomizedDelaySec=60",
        "Persistent=true",
        "Unit=sparkform-drift-local.service",
        "",
        "[Install]",
        "WantedBy=timers.target",
        "",
      ].join("\n"),
    );
    expect(timerUnit("s", parseInterval("2h"))).toContain(
      "OnCalendar=*-*-* 00/2:00:00\nRandomizedDelaySec=300\n",
    );
  });

  it("the cron line: the same schedule and command, shell-quoted, % escaped for cron", () => {
    expect(cronLine(inv, parseInterval("5m"), "/tmp/drift log")).toBe(
      "*/5 * * * * PULUMI_BACKEND_URL='file:///home/ops/my checkout/.sparkform/backend' " +
        "/usr/bin/node '/home/ops/my checkout/bin/sparkform.js' drift --stack local " +
        "--metrics-dir '/var/lib/node exporter/100\\%' >>'/tmp/drift log' 2>&1",
    );
    expect(cronLine({ ...inv, env: {} }, parseInterval("6h"), "/l")).toMatch(/^0 \*\/6 \* \* \* /);
  });

  it("an interval the calendar and cron cannot both keep is refused, naming the flag", () => {
    for (const ok of ["1m", "5m", "30m", "1h", "12h"]) expect(parseInterval(ok).text).toBe(ok);
    for (const bad of ["7m", "60m", "5", "5s", "24h", "0m", "-5m"])
      expect(() => parseInterval(bad), bad).toThrow(/--interval .* minutes that divide an hour/);
  });
});

const analyze = spawnSync("systemd-analyze", ["--version"], { encoding: "utf8" });

describe.skipIf(
  optionalOrSkip(
    "systemd-analyze",
    analyze.status === 0,
    "the simulated nodes' e2e verifies the unit files where the control host has no systemd",
  ),
)("systemd-analyze verify", () => {
  it("accepts the service and the timer as written, paths with spaces, % and $ included", () => {
    const dir = fs.mkdtempSync(path.join(work, "units with space-"));
    const metrics = path.join(dir, "metrics 100% $HOME");
    const real = {
      ...inv,
      node: process.execPath,
      cli: path.join(repoRoot, "bin", "sparkform.js"),
      metricsDir: metrics,
    };
    fs.writeFileSync(path.join(dir, "sparkform-drift-local.service"), serviceUnit(real));
    fs.writeFileSync(
      path.join(dir, "sparkform-drift-local.timer"),
      timerUnit("local", parseInterval("5m")),
    );
    const r = spawnSync(
      "systemd-analyze",
      ["verify", "sparkform-drift-local.timer", "sparkform-drift-local.service"],
      { cwd: dir, encoding: "utf8" },
    );
    expect(r.status, `${r.stdout}${r.stderr}`).toBe(0);
    expect(`${r.stdout}${r.stderr}`).not.toMatch(/sparkform-drift-local/);
  });
});

describe("--install and --uninstall in a temporary HOME", () => {
  let home: string;
  let calls: string[];
  const noManager: Systemctl = (args) => {
    calls.push(args.join(" "));
    return { ok: false, output: "Failed to connect to bus: No medium found" };
  };
  const manager: Systemctl = (args) => {
    calls.push(args.join(" "));
    return { ok: true, output: "" };
  };
  beforeEach(() => {
    home = fs.mkdtempSync(path.join(work, "home with space-"));
    calls = [];
  });
  const unitDir = () => userUnitDir(home);

  it("writes the service and the timer, enables the timer where a user manager answers", () => {
    const r = install(inv, parseInterval("5m"), { home, systemctl: manager, log: "/l" });
    expect(r.files).toEqual([
      path.join(home, ".config/systemd/user/sparkform-drift-local.service"),
      path.join(home, ".config/systemd/user/sparkform-drift-local.timer"),
    ]);
    expect(r.enabled).toBe(true);
    expect(calls).toEqual(["daemon-reload", "enable --now sparkform-drift-local.timer"]);
    expect(fs.readFileSync(r.files[1] as string, "utf8")).toBe(
      timerUnit("local", parseInterval("5m")),
    );
  });

  it("without a user manager: the files are written, and it says why it did not enable", () => {
    const r = install(inv, parseInterval("5m"), { home, systemctl: noManager, log: "/l" });
    expect(r.enabled).toBe(
      "no systemd user manager answered (Failed to connect to bus: No medium found)",
    );
    expect(r.cron).toBe(cronLine(inv, parseInterval("5m"), "/l"));
    expect(fs.readdirSync(unitDir()).sort()).toEqual([
      "sparkform-drift-local.service",
      "sparkform-drift-local.timer",
    ]);
  });

  it("--uninstall removes exactly what --install wrote, and nothing else in the directory", () => {
    fs.mkdirSync(unitDir(), { recursive: true });
    fs.writeFileSync(path.join(unitDir(), "mine.service"), "[Service]\n");
    install(inv, parseInterval("5m"), { home, systemctl: manager, log: "/l" });
    // A second install (a new interval) rewrites its own files.
    install(inv, parseInterval("10m"), { home, systemctl: manager, log: "/l" });
    calls = [];
    const r = uninstall("local", { home, systemctl: manager });
    expect(r.removed.map((f) => path.basename(f))).toEqual([
      "sparkform-drift-local.service",
      "sparkform-drift-local.timer",
    ]);
    expect(fs.readdirSync(unitDir())).toEqual(["mine.service"]);
    expect(calls).toEqual(["disable --now sparkform-drift-local.timer", "daemon-reload"]);
    expect(uninstall("local", { home, systemctl: manager })).toEqual({ removed: [], kept: [] });
  });

  it("never overwrites or removes a unit file it did not write, or one changed since", () => {
    fs.mkdirSync(unitDir(), { recursive: true });
    const theirs = path.join(unitDir(), "sparkform-drift-local.timer");
    fs.writeFileSync(theirs, "[Timer]\nOnCalendar=daily\n");
    expect(() =>
      install(inv, parseInterval("5m"), { home, systemctl: manager, log: "/l" }),
    ).toThrow(
      /sparkform-drift-local\.timer exists and was not written by `sparkform drift --install`.*left as it is/,
    );
    expect(fs.readFileSync(theirs, "utf8")).toBe("[Timer]\nOnCalendar=daily\n");
    fs.rmSync(theirs);
    const r = install(inv, parseInterval("5m"), { home, systemctl: manager, log: "/l" });
    fs.appendFileSync(r.files[0] as string, "# an operator's edit\n");
    const u = uninstall("local", { home, systemctl: manager });
    expect(u.kept).toEqual([r.files[0]]);
    expect(u.removed).toEqual([r.files[1]]);
    expect(fs.existsSync(r.files[0] as string)).toBe(true);
  });
});
