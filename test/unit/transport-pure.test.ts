// The pure parts of the transport: the environment-contract command, the ssh option set,
// target validation and the one error-message builder.
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import { validateTarget, type SshTarget } from "../../components/transport/connection";
import { classifySshFailure, formatRemoteError, redact } from "../../components/transport/errors";
import { buildRemoteCommand } from "../../components/transport/remote-command";
import { peerSshArgv, sshDestination, sshOptions } from "../../components/transport/ssh-options";

const KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBx6dGfxR1uSVCw4Ng0zJ7hWk3qzlB0Z7yU7sYVvW8o+";
const node: SshTarget = {
  name: "spark-1",
  host: "192.168.86.44",
  port: 22,
  user: "spark",
  hostKey: KEY,
};

describe("buildRemoteCommand", () => {
  it("runs argv through env -i and sh -c with an explicit PATH", () => {
    const b = buildRemoteCommand(["nvcc", "--version"]);
    expect(b.commandLine).toBe(
      `exec /usr/bin/env -i HOME="$HOME" USER="$USER" LOGNAME="$LOGNAME" LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/sh -c 'exec "$@"' sparkform nvcc --version`,
    );
    expect(b.display).toBe("nvcc --version");
    expect(b.stdin).toBeUndefined();
  });

  it("keeps secrets off the command line and sends them first on stdin", () => {
    const b = buildRemoteCommand({
      script: "echo ok",
      env: { HF_TOKEN: { secret: "hf_abc" }, A: "1" },
      stdin: "data",
    });
    expect(b.commandLine).not.toContain("hf_abc");
    expect(b.stdin).toBe("hf_abc\ndata");
    expect(b.display).toBe("HF_TOKEN=*** A=1 sh -c 'echo ok'");
    expect(b.secrets).toEqual(["hf_abc"]);
  });

  it("really runs in a local sh: $HOME-relative values, args via $@", () => {
    const b = buildRemoteCommand({
      script: 'printf "%s|" "$X" "$PATH" "$@"',
      args: ["a b", "$(c)"],
      env: { X: { home: "dir with space" } },
      path: [{ home: ".asdf/bin" }, "/opt/x"],
    });
    const out = execFileSync("/bin/sh", ["-c", b.commandLine], {
      encoding: "utf8",
      env: { HOME: "/h", USER: "u", LOGNAME: "u" },
    });
    expect(out).toBe(
      "/h/dir with space|/h/.asdf/bin:/opt/x:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin|a b|$(c)|",
    );
  });

  it.each([
    [{ script: "x", env: { PATH: "/x" } }, "set by the environment contract"],
    [{ script: "x", env: { "A-B": "1" } }, "not a valid shell variable name"],
    [{ script: "x", env: { T: { secret: "a\nb" } } }, "line break"],
    [{ script: "x", path: ["relative/bin"] }, "must be absolute"],
    [{ script: "x", path: ["/a:/b"] }, 'contains ":"'],
    [{ script: "x", env: { C: { home: "../etc" } } }, "relative path under $HOME"],
  ])("rejects %j", (cmd, msg) => {
    expect(() => buildRemoteCommand(cmd)).toThrow(msg);
  });
});

describe("sshOptions", () => {
  const args = sshOptions(node, { knownHosts: "/tmp/sf-x/kh", controlPath: "/tmp/sf-x/c-1" });
  const opts = args.filter((_, i) => args[i - 1] === "-o");

  it("pins the host key strictly, in batch mode, with a short connect timeout", () => {
    expect(opts).toEqual(
      expect.arrayContaining([
        "StrictHostKeyChecking=yes",
        "UserKnownHostsFile=/tmp/sf-x/kh",
        "GlobalKnownHostsFile=/dev/null",
        "HostKeyAlias=sparkform.spark-1",
        "BatchMode=yes",
        "ConnectTimeout=10",
        "ServerAliveInterval=15",
        "ControlMaster=auto",
        "ControlPath=/tmp/sf-x/c-1",
        "ForwardAgent=no",
      ]),
    );
    expect(args.join(" ")).not.toMatch(/StrictHostKeyChecking=(no|accept-new)|\s-A\b/);
  });

  it("forwards the agent only when asked, on its own connection", () => {
    const fwd = sshOptions(node, { knownHosts: "/k" }, { forwardAgent: "/tmp/sf-x/a-1" });
    expect(fwd).toContain("-A");
    expect(fwd).toContain("ControlPath=none");
  });

  it("puts -- before the host", () => {
    expect(sshDestination(node)).toEqual(["-p", "22", "-l", "spark", "--", "192.168.86.44"]);
    expect(peerSshArgv(node, "10.100.64.2", ".sparkform/kh").slice(-2)).toEqual([
      "--",
      "10.100.64.2",
    ]);
  });

  it("pins the jump host too, through an explicit ProxyCommand", () => {
    const j = sshOptions(
      { ...node, jump: { host: "bastion", user: "me", hostKey: KEY } },
      { knownHosts: "/k", jumpKnownHosts: "/kj" },
    );
    const pc = j.find((a) => a.startsWith("ProxyCommand="));
    expect(pc).toContain("'StrictHostKeyChecking=yes' -o 'UserKnownHostsFile=/kj'");
    expect(pc).toContain("-W '[%h]:%p' -- bastion");
  });
});

describe("validateTarget", () => {
  it.each([
    [{ host: "-oProxyCommand=x" }, 'node "spark-1" host "-oProxyCommand=x" starts with "-"'],
    [{ host: "a b" }, "is not a hostname"],
    [{ host: "h;reboot" }, "is not a hostname"],
    [{ user: "-l" }, 'node "spark-1" user "-l" starts with "-"'],
    [{ user: "a$b" }, "is not a valid user name"],
    [{ port: 0 }, 'node "spark-1" port must be an integer 1-65535'],
    [{ hostKey: "AAAA" }, 'node "spark-1" hostKey must be "<type> <base64>"'],
    [{ name: "../x" }, "node name"],
    [{ privateKey: "not a key" }, 'node "spark-1" privateKey is not a PEM/OpenSSH private key'],
  ])("rejects %j", (patch, msg) => {
    expect(() => validateTarget({ ...node, ...patch } as SshTarget)).toThrow(msg);
  });
  it("accepts IPv6 and ssh_config aliases", () => {
    expect(() => validateTarget({ ...node, host: "fe80::1" })).not.toThrow();
    expect(() => validateTarget({ ...node, host: "spark-2.local" })).not.toThrow();
  });
});

describe("errors", () => {
  it("classifies ssh's own failures", () => {
    expect(classifySshFailure(255, "Host key verification failed.")).toBe("host-key");
    expect(classifySshFailure(255, "ssh: connect to host x port 22: Connection refused")).toBe(
      "unreachable",
    );
    expect(classifySshFailure(255, "root@x: Permission denied (publickey).")).toBe("auth");
    expect(classifySshFailure(255, "my script failed")).toBe("exit");
    expect(classifySshFailure(3, "Connection refused")).toBe("exit");
  });

  it("assembles one message shape, redacting secrets", () => {
    const { message } = formatRemoteError(
      {
        node: "spark-2",
        step: "model",
        command: "curl -H 'Authorization: Bearer hf_x'",
        kind: "exit",
        exitCode: 22,
        stdout: "",
        stderr: "401 for hf_x\n",
      },
      ["hf_x"],
    );
    expect(message).toBe(
      `[spark-2] step "model" failed with exit code 22\n  command: curl -H 'Authorization: Bearer ***'\n  last output lines:\n    401 for ***`,
    );
    expect(
      redact("a\nLONGLINEOFAPEMKEYBODY123\n", ["-----BEGIN\nLONGLINEOFAPEMKEYBODY123\n-----END"]),
    ).toBe("a\n***\n");
  });
});
