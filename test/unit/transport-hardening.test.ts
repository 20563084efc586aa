// The pure parts of the transport hardening (issue 10, items 8, 11, 12): the one child
// environment, the ssh_config overrides in every ssh argv, the node-side time limit.
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { childEnv } from "../../components/transport/child-env";
import type { SshTarget } from "../../components/transport/connection";
import { classifySshFailure, formatRemoteError } from "../../components/transport/errors";
import { nodeLimitS } from "../../components/transport/node-connection";
import { buildRemoteCommand } from "../../components/transport/remote-command";
import { peerSshArgv, sshOptions } from "../../components/transport/ssh-options";

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBx6dGfxR1uSVCw4Ng0zJ7hWk3qzlB0Z7yU7sYVvW8o+";
const node: SshTarget = {
  name: "spark-1",
  host: "192.0.2.10",
  port: 22,
  user: "spark",
  hostKey: KEY,
};
const optionsOf = (argv: readonly string[]) => argv.filter((_, i) => argv[i - 1] === "-o");

describe("childEnv", () => {
  const parent = {
    PATH: "/usr/bin:/bin",
    HOME: "/home/op",
    USER: "op",
    LOGNAME: "op",
    LANG: "en_GB.UTF-8",
    LC_ALL: "C.UTF-8",
    LC_CTYPE: "C.UTF-8",
    TERM: "xterm",
    TMPDIR: "/tmp",
    TZ: "UTC",
    SSH_AUTH_SOCK: "/run/user/1000/agent",
    PULUMI_CONFIG: '{"sparkform:privateKey":"-----BEGIN OPENSSH PRIVATE KEY-----canary"}',
    PULUMI_CONFIG_SECRET_KEYS: '["sparkform:privateKey"]',
    PULUMI_ACCESS_TOKEN: "pul-canary",
    HF_TOKEN: "hf_canary",
    AWS_SECRET_ACCESS_KEY: "canary",
    LD_PRELOAD: "/tmp/evil.so",
    NODE_OPTIONS: "--require /tmp/evil.js",
  };

  it("keeps exactly the allow-list, and the agent only when asked", () => {
    const base = {
      PATH: "/usr/bin:/bin",
      HOME: "/home/op",
      USER: "op",
      LOGNAME: "op",
      LANG: "en_GB.UTF-8",
      LC_ALL: "C.UTF-8",
      LC_CTYPE: "C.UTF-8",
      TERM: "xterm",
      TMPDIR: "/tmp",
      TZ: "UTC",
    };
    expect(childEnv({}, parent)).toEqual(base);
    expect(childEnv({ agent: true }, parent)).toEqual({
      ...base,
      SSH_AUTH_SOCK: "/run/user/1000/agent",
    });
    expect(childEnv({ agentSocket: "/tmp/sf-x/a-1", agent: true }, parent)).toEqual({
      ...base,
      SSH_AUTH_SOCK: "/tmp/sf-x/a-1",
    });
    expect(childEnv({ set: { SHELL: "/bin/sh" } }, parent)).toEqual({ ...base, SHELL: "/bin/sh" });
  });

  it("a child started with it sees no secret of the parent's", () => {
    const out = execFileSync("/usr/bin/env", [], {
      encoding: "utf8",
      env: childEnv({ agent: true }, { ...process.env, ...parent, PATH: process.env.PATH }),
    });
    expect(out).not.toContain("canary");
    expect(out).not.toMatch(/^(PULUMI_|LD_PRELOAD|NODE_OPTIONS|AWS_|HF_)/m);
    expect(out).toMatch(/^SSH_AUTH_SOCK=\/run\/user\/1000\/agent$/m);
  });
});

describe("ssh argv overrides what an ssh_config may set", () => {
  const must = [
    "KnownHostsCommand=none",
    "VerifyHostKeyDNS=no",
    "RemoteCommand=none",
    "PermitLocalCommand=no",
    "SessionType=default",
    "StdinNull=no",
    "ProxyJump=none",
    "StrictHostKeyChecking=yes",
    "GlobalKnownHostsFile=/dev/null",
  ];

  it("on the connection to a node", () => {
    expect(optionsOf(sshOptions(node, { knownHosts: "/k" }))).toEqual(expect.arrayContaining(must));
  });

  it("on the jump hop, while the node's connection keeps sparkform's pinned ProxyCommand", () => {
    const j = sshOptions(
      { ...node, jump: { host: "bastion", user: "me", hostKey: KEY } },
      { knownHosts: "/k", jumpKnownHosts: "/kj" },
    );
    expect(j).not.toContain("ProxyJump=none");
    const hop = j.find((a) => a.startsWith("ProxyCommand=")) ?? "";
    for (const m of must) expect(hop).toContain(`'${m}'`);
  });

  it("leaves out options an older local ssh does not know (it could not read them either)", () => {
    const old = optionsOf(
      sshOptions(
        node,
        { knownHosts: "/k" },
        {
          capabilities: { knownHostsCommand: false, sessionType: false },
        },
      ),
    );
    expect(old.some((o) => /^(KnownHostsCommand|SessionType|StdinNull)=/.test(o))).toBe(false);
    expect(old).toContain("VerifyHostKeyDNS=no");
  });

  it("forwards only the socket it is given, never the operator's agent", () => {
    const plain = optionsOf(sshOptions(node, { knownHosts: "/k" }));
    expect(plain).toContain("ForwardAgent=no");
    const fwd = sshOptions(node, { knownHosts: "/k" }, { forwardAgent: "/tmp/sf-x/a-1" });
    expect(optionsOf(fwd)).toContain("ForwardAgent=/tmp/sf-x/a-1");
    expect(fwd.join(" ")).not.toContain("ForwardAgent=yes");
  });

  it("on the node-to-peer ssh: no ssh_config file at all", () => {
    const p = peerSshArgv(node, "10.100.64.2", ".cache/sparkform/kh");
    expect(p.slice(0, 3)).toEqual(["ssh", "-F", "/dev/null"]);
    expect(optionsOf(p)).toEqual(expect.arrayContaining(must));
  });
});

describe("time limits", () => {
  it("the node's limit is the control node's, rounded up, plus 2 s", () => {
    expect([1, 1000, 1500, 60_000, 24 * 3600_000].map(nodeLimitS)).toEqual([3, 3, 4, 62, 86402]);
  });

  it("runs the script under timeout inside env -i when given a limit", () => {
    const b = buildRemoteCommand(["sleep", "9"], false, 62);
    expect(b.commandLine).toContain(" timeout -k 5 62 /bin/sh -c 'exec \"$@\"' sparkform sleep 9");
    expect(buildRemoteCommand(["true"]).commandLine).not.toContain("timeout");
    expect(() => buildRemoteCommand(["true"], false, 0)).toThrow("must be a positive integer");
  });

  it("really ends a local sh at the limit", () => {
    const b = buildRemoteCommand({ script: "sleep 30; echo late" }, false, 1);
    const t0 = Date.now();
    let status: number | null = 0;
    let stdout = "";
    try {
      execFileSync("/bin/sh", ["-c", b.commandLine], {
        env: { HOME: "/tmp", USER: "u", LOGNAME: "u" },
        encoding: "utf8",
      });
    } catch (e) {
      ({ status, stdout } = e as { status: number | null; stdout: string });
    }
    // timeout's own exit: the sleep was ended, it never got to its echo; and not before 1 s.
    expect(status).toBe(124);
    expect(stdout).not.toContain("late");
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
  });

  it("names a stalled node apart from an unreachable one, with what to do", () => {
    expect(classifySshFailure(255, "Connection to 10.0.0.1 port 22 timed out")).toBe("stalled");
    expect(classifySshFailure(255, "Connection timed out during banner exchange")).toBe("stalled");
    expect(classifySshFailure(255, "Timeout, server 10.0.0.1 not responding.")).toBe("stalled");
    expect(classifySshFailure(255, "ssh: connect to host x port 22: Connection timed out")).toBe(
      "unreachable",
    );
    const { message } = formatRemoteError(
      {
        node: "spark-2",
        step: "rsync tree",
        command: "rsync -a",
        kind: "timeout",
        timeoutMs: 600_000,
        stdout: "",
        stderr: "",
      },
      [],
    );
    expect(message.split("\n")[0]).toBe(
      '[spark-2] step "rsync tree" timed out after 600000 milliseconds',
    );
    expect(message).toContain("the node ends it too");
    expect(message).toContain("Check that the node answers");
  });
});
