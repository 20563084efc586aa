// doctor's pure parts: findings → report and exit code; the policy pack's checks on a config;
// the node checks' judgements from a probe; and the probe itself (native/doctor/ports-and-files.py) run on
// this machine against a socket this test holds.
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import { parseStackConfig } from "../../components/stack-config";
import { programPath } from "../../components/native-script";
import { RemoteCommandError } from "../../components/transport";
import { agentFinding, controlFindings, nodeVersionFinding } from "../../cli/doctor/control";
import { EXIT, exitCode, renderFindings, type Finding } from "../../cli/doctor/findings";
import {
  diskFinding,
  fingerprint,
  lingerFinding,
  nodeNeeds,
  parseProbe,
  portFindings,
  presentedKey,
  reachFinding,
  skewFinding,
  type ProbeResult,
} from "../../cli/doctor/nodes";
import { policyFindings } from "../../cli/doctor/policy";
import type { SparkNodeFacts } from "../../components/node/facts";

const KEY1 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHotKQgqqiemTGB/6SmyM/G48iZRmJFDHA58qr3L3Kc3";
const KEY2 = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB4C2ZeUcxj+yTRCrwv+A/IEo6jrjqQCcuDLUhgOzYPX";
const REV = "8ed50be8ec6f2cdc3d064cc9ec6d1105bfa98b83";
const nodes = [
  {
    name: "spark-1",
    host: "10.0.0.1",
    user: "spark",
    hostKey: KEY1,
    fabricAddress: "192.168.100.10",
  },
  {
    name: "spark-2",
    host: "10.0.0.2",
    user: "spark",
    hostKey: KEY2,
    fabricAddress: "192.168.100.11",
  },
];
const f = (status: Finding["status"]): Finding => ({
  check: "x",
  where: "w",
  status,
  what: "seen",
  fix: "do",
});

describe("findings", () => {
  it("exit 0 when everything passed or was skipped, 1 on warnings only, 2 on any failure", () => {
    expect(exitCode([f("pass"), f("skip")])).toBe(EXIT.pass);
    expect(exitCode([f("pass"), f("warn")])).toBe(EXIT.warn);
    expect(exitCode([f("warn"), f("fail"), f("pass")])).toBe(EXIT.fail);
    expect([EXIT.pass, EXIT.warn, EXIT.fail]).toEqual([0, 1, 2]);
  });

  it("renders one aligned line per finding, the fix under each that did not pass, and the verdict", () => {
    const lines = renderFindings(
      [
        { check: "reach", where: "spark-1", status: "pass", what: "ok there", fix: "never shown" },
        { check: "port", where: "spark-2", status: "fail", what: "taken", fix: "stop it" },
      ],
      2345,
    );
    expect(lines).toEqual([
      "ok    spark-1  reach  ok there",
      "FAIL  spark-2  port   taken",
      "      fix: stop it",
      "",
      "doctor: FAIL: 1 ok, 0 warnings, 1 failures in 2.3 s (exit 2)",
    ]);
  });
});

describe("control node", () => {
  it.each([
    ["20.19.0", "pass"],
    ["20.20.2", "pass"],
    ["22.1.0", "pass"],
    ["20.18.3", "fail"],
    ["21.7.0", "fail"],
    ["18.20.0", "fail"],
  ])("Node.js %s: %s", (v, status) => {
    const r = nodeVersionFinding(v);
    expect(r.status).toBe(status);
    if (status === "fail") expect(r.fix).toContain("Node.js 22");
  });

  it("wants an agent only when nodes copy from each other", () => {
    const two = parseStackConfig({
      nodes,
      toolchain: { path: "~/.asdf", binDirs: ["bin"], probe: ["x"], expect: "x" },
    });
    expect(agentFinding(two, {}).status).toBe("warn");
    expect(agentFinding(two, {}).fix).toContain('eval "$(ssh-agent -s)"');
    expect(agentFinding(parseStackConfig({ nodes }), {}).status).toBe("pass");
  });
});

describe("the policy pack's checks on the config", () => {
  const base = {
    nodes,
    model: {
      repo: "org/m",
      revision: REV,
      files: ["m.gguf"],
      sha256: { "m.gguf": "a".repeat(64) },
    },
  };

  it("passes a pinned model and pinned host keys", () => {
    const out = policyFindings(parseStackConfig(base));
    expect(out.map((x) => [x.check, x.where, x.status])).toEqual([
      ["host-key-pinned", "spark-1", "pass"],
      ["host-key-pinned", "spark-2", "pass"],
      ["model-pinned", "config", "pass"],
    ]);
  });

  it("warns about a model file whose SHA-256 only the hub could know", () => {
    const out = policyFindings(parseStackConfig({ ...base, model: { ...base.model, sha256: {} } }));
    const w = out.find((x) => x.status === "warn");
    expect(w?.what).toContain("no SHA-256 configured for m.gguf");
    expect(w?.fix).toContain("sparkform:model.sha256");
  });

  it("refuses a worker with the RSS guard off, in the policy's own words", () => {
    const cfg = parseStackConfig({
      ...base,
      tree: { source: ".", dest: "~/src/t" },
      build: { preset: "sim", commit: "0".repeat(40) },
      worker: { nodes: ["spark-2"], rssLimitPercent: 0 },
    });
    const out = policyFindings(cfg);
    expect(out.find((x) => x.check === "rpc-bound-to-fabric")).toMatchObject({
      status: "pass",
      what: "binds 192.168.100.11",
    });
    const guard = out.find((x) => x.check === "rss-guard-on");
    expect(guard?.status).toBe("fail");
    expect(guard?.what).toContain("has no RSS guard (rssLimitPercent 0)");
  });
});

const probe = (over: Partial<ProbeResult> = {}): ProbeResult => ({
  now: 1000,
  user: "spark",
  linger: true,
  ports: [],
  files: [],
  ...over,
});

describe("node judgements", () => {
  const cfg = parseStackConfig({
    nodes,
    tree: { source: ".", dest: "~/src/t" },
    build: { preset: "sim", commit: "0".repeat(40) },
    worker: { nodes: ["spark-2"] },
    model: { repo: "org/m", revision: REV, files: ["m.gguf"] },
  });

  it("knows what each node must offer", () => {
    expect(nodeNeeds(cfg, "spark-2")).toEqual({
      ports: [{ port: 50052, unitPrefix: "sparkform-rpc-worker-", what: "rpc worker" }],
      modelFiles: [`~/models/org/m/${REV}/m.gguf`],
      runsUnits: true,
    });
    expect(nodeNeeds(cfg, "spark-1").ports).toEqual([]);
  });

  it("a port held by sparkform's own unit passes; anyone else's fails with the process", () => {
    const needs = nodeNeeds(cfg, "spark-2");
    const held = (unit: string | null, pid: number | null) =>
      probe({
        ports: [{ port: 50052, listeners: [{ address: "0.0.0.0", pid, command: "nc", unit }] }],
      });
    expect(
      portFindings("spark-2", probe({ ports: [{ port: 50052, listeners: [] }] }), needs)[0]?.status,
    ).toBe("pass");
    expect(
      portFindings("spark-2", held("sparkform-rpc-worker-50052.service", 7), needs)[0]?.status,
    ).toBe("pass");
    const foreign = portFindings("spark-2", held("session-3.scope", 4242), needs)[0];
    expect(foreign?.status).toBe("fail");
    expect(foreign?.what).toBe(
      "rpc worker port 50052 is taken by 0.0.0.0 (nc pid 4242, session-3.scope)",
    );
    expect(foreign?.fix).toContain("sparkform:worker.port");
    expect(portFindings("spark-2", held(null, null), needs)[0]?.what).toContain(
      "another user's process",
    );
  });

  it("linger matters only where a unit runs", () => {
    expect(
      lingerFinding("spark-1", probe({ linger: false }), nodeNeeds(cfg, "spark-1")).status,
    ).toBe("pass");
    const w = lingerFinding("spark-2", probe({ linger: false }), nodeNeeds(cfg, "spark-2"));
    expect(w.status).toBe("warn");
    expect(w.fix).toBe(
      "if polkit refuses that without a password, run once on the node: sudo loginctl enable-linger spark",
    );
  });

  it("clock skew beyond the round trip's uncertainty: warn over 2 s, fail over 60 s", () => {
    expect(skewFinding("n", 1001.5, 1000, 1001).status).toBe("pass");
    expect(skewFinding("n", 1004, 1000, 1001).status).toBe("warn");
    expect(skewFinding("n", 900, 1000, 1001).status).toBe("fail");
    expect(skewFinding("n", 1004, 1000, 1001).what).toBe(
      "clock +3.50 s from the control node (±0.50 s)",
    );
  });

  it("disk: the model's bytes still to fetch against the free space of modelsDir", () => {
    const facts = {
      disk: [
        {
          path: "~/models",
          checkedPath: "/home/spark",
          exists: false,
          freeBytes: 1000,
          totalBytes: 5000,
          reason: null,
        },
      ],
    } as unknown as SparkNodeFacts;
    const file = `~/models/org/m/${REV}/m.gguf`;
    expect(diskFinding(cfg, "spark-1", facts, probe(), undefined).status).toBe("skip");
    expect(diskFinding(cfg, "spark-1", facts, probe(), { "m.gguf": 900 }).status).toBe("pass");
    const full = diskFinding(cfg, "spark-1", facts, probe(), { "m.gguf": 1500 });
    expect(full.status).toBe("fail");
    expect(full.fix).toBe(
      "free 500 B on /home/spark or point sparkform:model.modelsDir at a bigger filesystem",
    );
    // Already there in full: nothing to fetch.
    const there = probe({ files: [{ path: file, exists: true, size: 1500 }] });
    expect(diskFinding(cfg, "spark-1", facts, there, { "m.gguf": 1500 }).what).toContain(
      "(0 B still to fetch)",
    );
  });

  it("a changed host key: both fingerprints and the command that pins the new key", () => {
    const t = { name: "spark-2", host: "10.0.0.2", port: 22, user: "spark", hostKey: KEY1 };
    const e = new RemoteCommandError(
      {
        node: "spark-2",
        step: "doctor probe",
        command: "x",
        kind: "host-key",
        stdout: "",
        stderr: "",
      },
      [],
    );
    const r = reachFinding(t, 1, e, 120, KEY2);
    expect(r.check).toBe("host-key");
    expect(r.what).toContain(`pinned ${fingerprint(KEY1)}, presented ${fingerprint(KEY2)}`);
    expect(r.fix).toContain("pulumi config set --path 'sparkform:nodes[1].hostKey' '<that line>'");
  });

  it("fingerprints as ssh-keygen prints them", () => {
    const dir = mkdtempSync(path.join(tmpdir(), "doctor-fp-"));
    writeFileSync(path.join(dir, "k.pub"), `${KEY2}\n`);
    const printed = execFileSync("ssh-keygen", ["-l", "-f", path.join(dir, "k.pub")], {
      encoding: "utf8",
    });
    expect(printed.split(" ")[1]).toBe(fingerprint(KEY2));
  });
});

describe("ports-and-files.py, run here", () => {
  it("finds this process listening, reads files and parses through the schema", async () => {
    const server = net.createServer();
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
    const port = (server.address() as net.AddressInfo).port;
    try {
      const before = Date.now() / 1000;
      const r = spawnSync(
        "python3",
        [
          programPath("doctor/ports-and-files.py"),
          "--port",
          String(port),
          "--file",
          "/etc/hostname",
          "--file",
          "~/no-such-file",
        ],
        { encoding: "utf8" },
      );
      const after = Date.now() / 1000;
      expect(r.stderr).toBe("");
      const p = parseProbe(r.stdout, "here");
      // This machine's clock, read while the probe ran (1 ms either side for the rounding).
      expect(p.now).toBeGreaterThanOrEqual(before - 0.001);
      expect(p.now).toBeLessThanOrEqual(after + 0.001);
      expect(p.ports).toEqual([
        { port, listeners: [expect.objectContaining({ address: "127.0.0.1", pid: process.pid })] },
      ]);
      expect(p.files[0]).toMatchObject({ path: "/etc/hostname", exists: true });
      expect(p.files[1]).toEqual({ path: "~/no-such-file", exists: false, size: null });
    } finally {
      server.close();
    }
  });

  it("a node printing something else is refused, naming the node", () => {
    expect(() => parseProbe('{"now": "soon"}', "spark-9")).toThrow(
      /probe output from node "spark-9" is invalid at \//,
    );
  });
});

describe("doctor's own children (issue 22 item 14)", () => {
  it("ssh-keyscan and the control node's probes get the minimal environment, no secret", () => {
    // Stand-ins first on PATH that record the environment they were given.
    const bin = mkdtempSync(path.join(tmpdir(), "doctor-env-"));
    const tools = ["ssh-keyscan", "ssh", "rsync", "python3"];
    for (const tool of tools) {
      const f = path.join(bin, tool);
      writeFileSync(f, `#!/bin/sh\nenv > '${bin}/env-${tool}'\necho 'OpenSSH_9.2p1 3.2.7'\n`);
      chmodSync(f, 0o755);
    }
    const saved = { ...process.env };
    // What a provider process's environment holds: the stack config with secrets decrypted.
    process.env.PATH = `${bin}:${process.env.PATH ?? ""}`;
    process.env.PULUMI_CONFIG = '{"sparkform:privateKey":"sekrit-key"}';
    process.env.AWS_SECRET_ACCESS_KEY = "sekrit-aws";
    try {
      presentedKey({ name: "spark-1", host: "127.0.0.1", port: 22, user: "spark", hostKey: KEY1 });
      controlFindings(undefined);
    } finally {
      process.env = saved;
    }
    for (const tool of tools) {
      const env = readFileSync(path.join(bin, `env-${tool}`), "utf8");
      const names = env
        .split("\n")
        .filter((l) => l.includes("="))
        .map((l) => l.slice(0, l.indexOf("=")));
      expect({ tool, secret: env.includes("sekrit") }).toEqual({ tool, secret: false });
      // The allow-list (components/transport/child-env.ts), and what sh itself sets.
      const allowed = /^(PATH|HOME|USER|LOGNAME|LANG|TERM|TMPDIR|TZ|LC_\w+|SHELL|PWD|SHLVL|_)$/;
      expect({ tool, others: names.filter((n) => !allowed.test(n)) }).toEqual({ tool, others: [] });
    }
  });
});
