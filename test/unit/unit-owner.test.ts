// Issue 33 item 8: two stacks serving on one node and port. Every unit sparkform starts records
// its stack (`<project>/<stack>`, the unit's Description); start.sh refuses to stop or replace a
// unit another stack owns (naming it and the fix), stop.sh leaves such a unit running, the
// router's files.sh writes and removes nothing of a port another stack's router holds, and a
// unit an older sparkform started (no record) is adopted live, without a restart. The programs
// run here for real against a stand-in `systemctl` that answers as systemd
// does for a unit of stack "proj/other" and record every call.
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createHash } from "node:crypto";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { execa } from "execa";
import { createServer } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import {
  adoptedUnit,
  leftUnit,
  OTHER_OWNER_EXIT,
  unitOwnerCheckCommand,
  unitStartCommand,
  unitStatusCommand,
  unitStopCommand,
} from "../../components/unit/commands";

const root = mkdtempSync(path.join(tmpdir(), "sparkform-owner-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
const bin = path.join(root, "bin");
const home = path.join(root, "home");
const calls = path.join(root, "calls");
mkdirSync(bin, { recursive: true });
mkdirSync(home, { recursive: true });
const sh = (name: string, text: string) => {
  writeFileSync(path.join(bin, name), `#!/bin/sh\n${text}`);
  chmodSync(path.join(bin, name), 0o755);
};
// systemctl: every call recorded; `show -p Description` answers OWNERS' line for a unit named
// in it ("UNIT=OWNER" per line), LoadState loaded, FragmentPath the unit file start.sh wrote,
// everything else as an active unit; `start` of the router's unit listens on its port (a
// stand-in server, its pid kept), so start.sh gets past its readiness wait.
const pids = path.join(root, "pids");
sh(
  "systemctl",
  `echo "systemctl $*" >> ${JSON.stringify(calls)}
unit=""; for a in "$@"; do case $a in *.service) unit=\${a%.service} ;; esac; done
case "$*" in
*Description*) o=$(sed -n "s|^$unit=||p" ${JSON.stringify(path.join(root, "owners"))}); [ -z "$o" ] || echo "sparkform unit of stack $o" ;;
*LoadState*) echo loaded ;;
*FragmentPath*) echo "$HOME/.config/systemd/user/$unit.service" ;;
*ActiveState*) echo active ;;
*NRestarts*) echo 0 ;;
*"start --no-block sparkform-router-"*)
  p=\${unit#sparkform-router-}
  python3 -m http.server "$p" --bind 127.0.0.1 >/dev/null 2>&1 &
  echo $! >> ${JSON.stringify(pids)} ;;
esac
exit 0
`,
);
afterAll(() => {
  if (existsSync(pids))
    for (const p of readFileSync(pids, "utf8").split("\n").filter(Boolean))
      try {
        process.kill(Number(p));
      } catch {
        // already gone
      }
});
sh("loginctl", "exit 0\n");
// The router's binary (a file whose digest is not the expected one: the check after the stop).
const caddy = path.join(root, "caddy");
writeFileSync(caddy, "#!/bin/sh\n");
chmodSync(caddy, 0o755);

const owners = (lines: Record<string, string>) =>
  writeFileSync(
    path.join(root, "owners"),
    Object.entries(lines)
      .map(([u, o]) => `${u}=${o}\n`)
      .join(""),
  );
const ran = () => (existsSync(calls) ? readFileSync(calls, "utf8") : "");

async function run(program: string, args: readonly string[]) {
  const interpreter = program.endsWith(".py") ? "python3" : "sh";
  return execa(interpreter, [programPath(program), ...args], {
    reject: false,
    extendEnv: false,
    env: { PATH: `${bin}:${process.env.PATH}`, HOME: home, XDG_RUNTIME_DIR: root },
  });
}

// The user manager's bus (user-unit.sh waits for a socket there; the stand-ins answer for it).
const bus = createServer();
beforeAll(async () => {
  await new Promise<void>((r) => bus.listen(path.join(root, "bus"), r));
});
afterAll(() => {
  bus.close();
});
beforeEach(() => {
  rmSync(calls, { force: true });
});

const startArgs = (owner: string, o: { port?: number; digest?: string; was?: string } = {}) =>
  unitStartCommand(
    {
      role: "router",
      port: o.port ?? 8090,
      bind: "127.0.0.1",
      binary: caddy,
      digest: o.digest ?? "0".repeat(64),
      rssLimitPercent: 0,
      rssIntervalSeconds: 2,
      flags: ["run"],
      what: "router",
      owner: {
        stack: owner,
        node: "spark-1",
        portKey: "sparkform:server.router.port",
        ...(o.was ? { was: o.was } : {}),
      },
    },
    {},
    { display: "start" },
  ).args ?? [];

/** A port nothing listens on now. */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe("start.sh: another stack's unit on this port", () => {
  it("refuses, naming the unit, the node and the other stack, and stops nothing", async () => {
    owners({ "sparkform-router-8090": "proj/other" });
    const r = await run("unit/start.sh", startArgs("proj/mine"));
    expect(r.stderr.trim()).toBe(
      "sparkform-router-8090 on spark-1 belongs to stack proj/other, not this stack (proj/mine), so nothing was stopped or written: " +
        "give this stack another port (pulumi config set --path sparkform:server.router.port <port>) or run `pulumi destroy` on stack proj/other first",
    );
    expect(r.exitCode).toBe(10);
    expect(ran()).not.toMatch(/systemctl --user (stop|reset-failed)/);
    expect(ran()).not.toMatch(/systemctl --user (start|enable)/);
  });

  it("its own unit, or one an older sparkform started (no owner recorded), is replaced as before", async () => {
    for (const o of [{ "sparkform-router-8090": "proj/mine" }, {}] as Record<string, string>[]) {
      owners(o);
      rmSync(calls, { force: true });
      const r = await run("unit/start.sh", startArgs("proj/mine"));
      // Past the owner check: the old unit is stopped, then the binary's digest refused.
      expect(r.stderr).toMatch(
        /^\S+\/caddy has sha256 [0-9a-f]{64}, expected 0{64} \(the verified build's\); the router stays stopped$/,
      );
      expect(r.exitCode).toBe(7);
      expect(ran()).toContain("systemctl --user stop sparkform-router-8090.service");
    }
  });

  it("a renamed stack's unit (--was, the owner state recorded) is its own", async () => {
    owners({ "sparkform-router-8090": "proj/before" });
    const r = await run("unit/start.sh", startArgs("proj/mine", { was: "proj/before" }));
    expect(r.exitCode).toBe(7);
    expect(ran()).toContain("systemctl --user stop sparkform-router-8090.service");
  });

  it("records the stack as the unit's Description when it starts it", async () => {
    owners({});
    const port = await freePort();
    const digest = createHash("sha256").update(readFileSync(caddy)).digest("hex");
    const r = await run("unit/start.sh", startArgs("proj/mine", { port, digest }));
    expect(r.stderr).toBe("");
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain(`unit=sparkform-router-${port}`);
    expect(ran()).toContain(`systemctl --user start --no-block sparkform-router-${port}.service`);
    // The unit file, enabled: it records the stack, and the boot starts it again.
    const file = readFileSync(
      path.join(home, ".config", "systemd", "user", `sparkform-router-${port}.service`),
      "utf8",
    );
    expect(file).toContain("\nDescription=sparkform router of stack proj/mine\n");
    expect(file).toContain("\nWantedBy=default.target\n");
    expect(ran()).toContain(`systemctl --user enable sparkform-router-${port}.service`);
  });
});

describe("start.sh --owner-check: before anything writes a file of the port", () => {
  const check = (owner: string, was?: string) =>
    unitOwnerCheckCommand(
      {
        role: "worker",
        port: 50052,
        what: "worker",
        owner: {
          stack: owner,
          node: "spark-2",
          portKey: "sparkform:worker.port",
          ...(was ? { was } : {}),
        },
      },
      {},
    ).args ?? [];

  it("refuses another stack's unit, naming it and the fix", async () => {
    owners({ "sparkform-rpc-worker-50052": "proj/other" });
    const r = await run("unit/start.sh", check("proj/mine"));
    expect(r.exitCode).toBe(OTHER_OWNER_EXIT);
    expect(r.stderr.trim()).toBe(
      "sparkform-rpc-worker-50052 on spark-2 belongs to stack proj/other, not this stack (proj/mine), so nothing was stopped or written: " +
        "give this stack another port (pulumi config set --path sparkform:worker.port <port>) or run `pulumi destroy` on stack proj/other first",
    );
    expect(ran()).not.toMatch(/systemctl --user (stop|reset-failed|set-property)/);
  });

  it("adopts a unit an older sparkform started (no record), live: nothing is stopped", async () => {
    owners({});
    const r = await run("unit/start.sh", check("proj/mine"));
    expect(r.exitCode).toBe(0);
    expect(adoptedUnit(r.stdout)).toBe("sparkform-rpc-worker-50052");
    expect(ran()).toContain(
      "systemctl --user set-property --runtime sparkform-rpc-worker-50052.service Description=sparkform worker of stack proj/mine",
    );
    expect(ran()).toContain(
      "systemctl --user set-property --runtime sparkform-rpc-guard-50052.service Description=sparkform RSS guard of stack proj/mine",
    );
    expect(ran()).not.toMatch(/systemctl --user (stop|reset-failed|start|enable)/);
  });

  it("its own unit: nothing to record; a renamed stack's: recorded under the new name", async () => {
    owners({ "sparkform-rpc-worker-50052": "proj/mine" });
    const own = await run("unit/start.sh", check("proj/mine"));
    expect(own.exitCode).toBe(0);
    expect(adoptedUnit(own.stdout)).toBeUndefined();
    expect(ran()).not.toContain("set-property");
    owners({ "sparkform-rpc-worker-50052": "proj/before" });
    const renamed = await run("unit/start.sh", check("proj/mine", "proj/before"));
    expect(renamed.exitCode).toBe(0);
    expect(adoptedUnit(renamed.stdout)).toBe("sparkform-rpc-worker-50052");
  });
});

describe("stop.sh: another stack's unit", () => {
  const stopArgs = (owner: string) =>
    unitStopCommand({ role: "server", port: 8080 }, {}, { display: "stop", owner }).args ?? [];

  it("is left running, with its files, and says whose it is", async () => {
    owners({
      "sparkform-llama-server-8080": "proj/other",
      "sparkform-llama-guard-8080": "proj/other",
    });
    const state = path.join(home, ".cache/sparkform/serving");
    mkdirSync(state, { recursive: true });
    writeFileSync(path.join(state, "server-8080.log"), "theirs\n");
    writeFileSync(path.join(state, "api-key-8080"), "their key\n");
    const r = await run("unit/stop.sh", stopArgs("proj/mine"));
    expect(r.exitCode).toBe(0);
    expect(r.stderr).toContain(
      "sparkform-llama-server-8080 belongs to stack proj/other, not this stack (proj/mine): it was left running",
    );
    expect(leftUnit(r.stdout)).toEqual({
      unit: "sparkform-llama-server-8080",
      owner: "proj/other",
    });
    expect(r.stdout).not.toContain("stopped=");
    // Nor its guard, nor the smoke's reference beside it.
    expect(ran()).not.toMatch(/systemctl --user (stop|reset-failed)/);
    expect(readFileSync(path.join(state, "api-key-8080"), "utf8")).toBe("their key\n");
    expect(readFileSync(path.join(state, "server-8080.log"), "utf8")).toBe("theirs\n");
  });

  it("its own unit is stopped and its files removed", async () => {
    owners({ "sparkform-llama-server-8080": "proj/mine" });
    const state = path.join(home, ".cache/sparkform/serving");
    mkdirSync(state, { recursive: true });
    writeFileSync(path.join(state, "api-key-8080"), "my key\n");
    const r = await run("unit/stop.sh", stopArgs("proj/mine"));
    expect(r.exitCode).toBe(0);
    expect(ran()).toContain("systemctl --user stop sparkform-llama-server-8080.service");
    expect(existsSync(path.join(state, "api-key-8080"))).toBe(false);
  });
});

describe("files.sh: another stack's router port", () => {
  const dir = path.join(home, ".cache/sparkform/router");
  it("install writes no config over theirs; remove removes none of theirs", async () => {
    owners({ "sparkform-router-8090": "proj/other" });
    mkdirSync(dir, { recursive: true });
    writeFileSync(path.join(dir, "router-8090.json"), "{theirs}");
    const name = `caddy-${"0".repeat(16)}`;
    const i = await run("router/files.sh", [
      ...["install", dir, name, "0".repeat(64), "8090", "{mine}"],
      ...["proj/mine", "spark-1", "sparkform:server.router.port"],
    ]);
    expect(i.stderr).toContain(
      "sparkform-router-8090 on spark-1 belongs to stack proj/other, not this stack (proj/mine), so nothing was stopped or written",
    );
    expect(i.exitCode).toBe(10);
    expect(readFileSync(path.join(dir, "router-8090.json"), "utf8")).toBe("{theirs}");
    const r = await run("router/files.sh", ["remove", dir, "8090", "proj/mine"]);
    expect(r.exitCode).toBe(0);
    expect(r.stdout).toContain("left=sparkform-router-8090 owner=proj/other");
    expect(readFileSync(path.join(dir, "router-8090.json"), "utf8")).toBe("{theirs}");
  });
});

describe("status.py: whose the unit is", () => {
  it('reads the stack the unit records ("" for none), for the stages\' drift', async () => {
    const args = unitStatusCommand(
      { role: "router", port: 8090, binary: caddy, marks: [], keep: 5 },
      {},
      "status",
    ).args;
    owners({ "sparkform-router-8090": "proj/other" });
    const theirs = await run("unit/status.py", args ?? []);
    expect(JSON.parse(theirs.stdout).owner).toBe("proj/other");
    owners({});
    const none = await run("unit/status.py", args ?? []);
    expect(JSON.parse(none.stdout).owner).toBe("");
  });
});
