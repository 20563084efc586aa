// The smoke's single-node reference and the server's stop touch only ports sparkform's own
// units hold. Two stacks serving on 8080 and 8081 (8080's reference port) used to block each
// other's drain and destroy (stop.sh waited for 8081 to be free), and any listener on port + 1
// answered for "one node alone"; now start.sh refuses that port before anything starts there.
import { spawnSync } from "node:child_process";
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import { createHash } from "node:crypto";
import { programRef } from "../../components/native-script";
import {
  referencePort,
  referenceStartCommand,
  SERVER_PROGRAMS,
  serverStopCommand,
} from "../../components/serving/commands";
import type { LlamaServerInputs } from "../../components/serving/state";

let dir: string;
let other: Server;
let otherPort: number;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), "sparkform-serving-ports-"));
  mkdirSync(path.join(dir, "bin"));
  mkdirSync(path.join(dir, "run"));
  // systemd as the user's manager answers for units that do not exist (LoadState not-found).
  writeFileSync(
    path.join(dir, "bin", "systemctl"),
    `#!/bin/sh\necho "$*" >> ${JSON.stringify(path.join(dir, "calls"))}\ncase "$*" in *LoadState*) echo not-found ;; esac\nexit 0\n`,
  );
  chmodSync(path.join(dir, "bin", "systemctl"), 0o755);
  // sleep, as stop.sh's wait for a port sleeps between its looks: each call recorded.
  writeFileSync(
    path.join(dir, "bin", "sleep"),
    `#!/bin/sh\necho "sleep $*" >> ${JSON.stringify(path.join(dir, "sleeps"))}\nexit 0\n`,
  );
  chmodSync(path.join(dir, "bin", "sleep"), 0o755);
  // Someone else's server on the port after ours: another stack's, not sparkform's reference.
  other = createServer();
  await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
  otherPort = (other.address() as AddressInfo).port;
  const bus = createServer();
  await new Promise<void>((r) => bus.listen(path.join(dir, "run", "bus"), r));
});

afterAll(() => {
  other?.close();
  rmSync(dir, { recursive: true, force: true });
});

const env = () => ({
  PATH: `${path.join(dir, "bin")}:${process.env.PATH}`,
  HOME: dir,
  XDG_RUNTIME_DIR: path.join(dir, "run"),
});

describe("stop.sh", () => {
  it("does not wait for a port its units did not hold", () => {
    // PORT is free; REF_PORT is another stack's server.
    const r = spawnSync(
      "sh",
      // The server's stop for PORT; its reference's port is REF_PORT (serverStopCommand).
      [programPath("unit/stop.sh"), ...(serverStopCommand(otherPort - 1, {}).args ?? [])],
      {
        env: env(),
        encoding: "utf8",
        timeout: 60_000,
      },
    );
    expect(r.stderr).not.toMatch(/still listened on/);
    expect(r.status).toBe(0);
    // It never looked twice: no sleep between looks at a port.
    expect(existsSync(path.join(dir, "sleeps"))).toBe(false);
  });
});

describe("the smoke's reference, started by start.sh", () => {
  it("refuses a port someone else listens on, starts nothing there, and stops only its own unit", () => {
    const bin = path.join(dir, "llama-server");
    writeFileSync(bin, "#!/bin/sh\nexit 0\n");
    chmodSync(bin, 0o755);
    writeFileSync(path.join(dir, "bin", "loginctl"), "#!/bin/sh\nexit 0\n");
    chmodSync(path.join(dir, "bin", "loginctl"), 0o755);
    const i = {
      binary: bin,
      binaryDigest: createHash("sha256").update(readFileSync(bin)).digest("hex"),
      rssIntervalSeconds: 2,
      healthTimeoutSeconds: 5,
      modelPath: "~/models/m.gguf",
      plan: { context: 4096, cacheType: "f16" },
      clientDevice: "CPU",
      programs: Object.fromEntries(
        Object.entries(SERVER_PROGRAMS).map(([k, p]) => [k, programRef(p)]),
      ),
    } as unknown as LlamaServerInputs;
    // The server listens on otherPort - 1: its reference's port is another's.
    const cmd = referenceStartCommand(i, referencePort(otherPort - 1));
    expect(cmd.args).toContain(String(otherPort));
    writeFileSync(path.join(dir, "calls"), "");
    const r = spawnSync("sh", ["-c", cmd.stdin ?? "", "start.sh", ...(cmd.args ?? [])], {
      env: env(),
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(r.status).toBe(5);
    expect(r.stderr).toMatch(new RegExp(`port ${otherPort} is in use by a process that is not`));
    // It never started a reference unit, and stopped only the reference's own name.
    const calls = readFileSync(path.join(dir, "calls"), "utf8");
    expect(calls).not.toMatch(/systemd-run|start /);
    expect(calls).toMatch(new RegExp(`stop sparkform-llama-reference-${otherPort}\\.service`));
    expect(calls).not.toMatch(/sparkform-llama-server/);
  });
});
