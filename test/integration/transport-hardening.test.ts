// Hardening of the transport (issue 10, items 8, 9, 11, 12) against real parts: a throwaway
// sshd on 127.0.0.1, real ssh, rsync, ssh-agent, git and python3, and a fake "node" that
// accepts TCP, sends an SSH banner and then stalls.
//   8  an ssh_config cannot widen host-key pinning or replace the command;
//   9  a node-to-node copy forwards a private agent holding exactly the cluster's key;
//   11 no child sparkform starts sees PULUMI_CONFIG or a secret from the environment;
//   12 a node that stalls fails within a bound, with a message, and a step that times out
//      on the control node also ends on the node.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { treeCommit } from "../../components/build/tree-commit";
import { localTreeDigest } from "../../components/tree/digest";
import { sessionDir } from "../../components/transport/control-master";
import { sshCapabilities } from "../../components/transport/ssh-capabilities";
import { peerSshArgv, sshDestination, sshOptions } from "../../components/transport/ssh-options";
import { copyFromPeerOrRelay } from "../../components/peer-copy";
import { close, openNode, RemoteCommandError, type SshTarget } from "../../components/transport";
import { forwardableKey } from "../../components/transport/node-connection";
import { startSshAgent, type TestAgent } from "../../sim/world/ssh-agent";
import { requireOrSkip } from "../support/requires";

const SSHD = "/usr/sbin/sshd";
const haveTools = ["/usr/sbin/sshd", "/usr/bin/rsync", "/usr/bin/git", "/usr/bin/python3"].every(
  (f) => fs.existsSync(f),
);

let dir: string;
const daemons: ChildProcess[] = [];
const servers: net.Server[] = [];
const agents: TestAgent[] = [];
let node: SshTarget;
let hostPub: string;

function keygen(file: string, passphrase = ""): string {
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", passphrase, "-C", "", "-f", file]);
  return fs.readFileSync(`${file}.pub`, "utf8").trim();
}

function fingerprint(pubFile: string): string {
  return execFileSync("ssh-keygen", ["-l", "-f", pubFile], { encoding: "utf8" }).split(" ")[1]!;
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function waitForPort(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, "127.0.0.1", () => {
        c.destroy();
        resolve(true);
      });
      c.on("error", () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`sshd did not listen on ${port}`);
}

/** An sshd on a free port with the test's host key and authorized keys, plus `extra` lines. */
async function startSshd(name: string, extra: readonly string[] = []): Promise<number> {
  const port = await freePort();
  const config = path.join(dir, `sshd_config.${name}`);
  fs.writeFileSync(
    config,
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${dir}/host`,
      `AuthorizedKeysFile ${dir}/authorized_keys`,
      `PidFile ${dir}/sshd.${name}.pid`,
      "StrictModes no",
      "UsePAM no",
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "PermitRootLogin prohibit-password",
      "AllowAgentForwarding yes",
      "LogLevel ERROR",
      ...extra,
    ].join("\n") + "\n",
  );
  fs.mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  daemons.push(spawn(SSHD, ["-D", "-e", "-f", config], { stdio: "ignore" }));
  await waitForPort(port);
  return port;
}

/** A "node" that accepts TCP, sends an SSH banner, then never says anything again. */
/** A "node" that accepts, sends its banner and stalls; `connections()`: how many it accepted. */
async function stallingServer(): Promise<{ port: number; connections: () => number }> {
  const sockets = new Set<net.Socket>();
  let accepted = 0;
  const s = net.createServer((c) => {
    accepted++;
    sockets.add(c);
    c.on("error", () => undefined);
    c.write("SSH-2.0-OpenSSH_9.2p1 stalled\r\n");
  });
  s.on("close", () => sockets.forEach((c) => c.destroy()));
  const close = s.close.bind(s);
  s.close = (cb) => {
    sockets.forEach((c) => c.destroy());
    return close(cb);
  };
  servers.push(s);
  await new Promise<void>((resolve) => s.listen(0, "127.0.0.1", resolve));
  return { port: (s.address() as net.AddressInfo).port, connections: () => accepted };
}

async function caught(p: Promise<unknown>): Promise<RemoteCommandError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof RemoteCommandError) return e;
    throw e;
  }
  throw new Error("expected a RemoteCommandError");
}

/** Run `f` with SSH_AUTH_SOCK set to `sock` (undefined: unset), restoring it afterwards. */
async function withAgentSocket<T>(sock: string | undefined, f: () => Promise<T>): Promise<T> {
  const saved = process.env.SSH_AUTH_SOCK;
  if (sock === undefined) delete process.env.SSH_AUTH_SOCK;
  else process.env.SSH_AUTH_SOCK = sock;
  try {
    return await f();
  } finally {
    if (saved === undefined) delete process.env.SSH_AUTH_SOCK;
    else process.env.SSH_AUTH_SOCK = saved;
  }
}

/** `ssh -G` (no connection) with these options: its settings as a lower-case key → value map. */
function sshG(args: readonly string[]): Map<string, string> {
  const out = execFileSync("ssh", ["-G", ...args], { encoding: "utf8", stdio: "pipe" });
  const m = new Map<string, string>();
  for (const line of out.split("\n")) {
    const i = line.indexOf(" ");
    if (i > 0) m.set(line.slice(0, i), line.slice(i + 1));
  }
  return m;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe.skipIf(
  requireOrSkip(
    "sshd, rsync, git and python3",
    haveTools,
    "the transport is hardened against a real sshd",
  ),
)("transport hardening against a local sshd", () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync("/tmp/sf-hard-");
    hostPub = keygen(path.join(dir, "host"));
    const clientPub = keygen(path.join(dir, "client"));
    fs.writeFileSync(path.join(dir, "authorized_keys"), `${clientPub}\n`, { mode: 0o600 });
    const port = await startSshd("main");
    node = {
      name: "local",
      host: "127.0.0.1",
      port,
      user: os.userInfo().username,
      hostKey: hostPub,
      identityFile: path.join(dir, "client"),
    };
  });

  afterAll(() => {
    close();
    for (const a of agents) a.stop();
    for (const s of servers) s.close();
    for (const d of daemons) d.kill();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  describe("item 8: an ssh_config cannot widen pinning or replace the command", () => {
    it("a hostile ssh_config that vouches for the node's real key: a wrong pinned key still fails as a host-key error", async () => {
      // The node presents `host`; the stack pins another key. The config tries every way ssh
      // has to accept the real key anyway: a KnownHostsCommand printing it under the alias,
      // known_hosts files holding it, DNS, no strict checking, learning keys.
      const real = path.join(dir, "kh-real");
      fs.writeFileSync(real, `sparkform.hostile ${hostPub}\n`);
      const cfg = path.join(dir, "hostile-trust.cfg");
      fs.writeFileSync(
        cfg,
        [
          "Host *",
          `  KnownHostsCommand /bin/cat ${real}`,
          "  VerifyHostKeyDNS yes",
          "  StrictHostKeyChecking no",
          `  UserKnownHostsFile ${real}`,
          `  GlobalKnownHostsFile ${real}`,
          "  UpdateHostKeys yes",
          "  CheckHostIP yes",
        ].join("\n") + "\n",
      );
      const wrong = keygen(path.join(dir, "wrong-host"));
      const e = await caught(
        openNode({ ...node, name: "hostile", hostKey: wrong, sshConfigPath: cfg }).run(["true"], {
          step: "facts",
        }),
      );
      expect(e.kind).toBe("host-key");
      expect(e.message).toContain(
        `[hostile] step "facts" could not connect to ${node.user}@127.0.0.1:${node.port}: host key verification failed`,
      );
      expect(e.message).toContain("host key checking is never disabled");
      // The same config with the right pinned key connects: only the pin decides.
      const ok = await openNode({ ...node, name: "hostile-ok", sshConfigPath: cfg }).run(
        ["echo", "pinned"],
        { step: "facts" },
      );
      expect(ok.stdout).toBe("pinned\n");
    });

    it("a hostile ssh_config cannot replace the command, run a local command, add a hop or hold stdin", async () => {
      const marker = path.join(dir, "pwned");
      const cfg = path.join(dir, "hostile-run.cfg");
      fs.writeFileSync(
        cfg,
        [
          "Host *",
          `  RemoteCommand touch ${marker}.remote`,
          "  PermitLocalCommand yes",
          `  LocalCommand touch ${marker}.local`,
          "  ProxyJump nobody@192.0.2.1", // TEST-NET: reaching the node through it would fail
          "  ForwardAgent yes",
          "  SessionType none",
          "  StdinNull yes",
          "  ForwardX11 yes",
        ].join("\n") + "\n",
      );
      const t: SshTarget = { ...node, name: "hostile-run", sshConfigPath: cfg };
      const conn = openNode(t);
      const r = await conn.run(
        { script: 'cat; echo " $SSH_AUTH_SOCK."', stdin: "stdin arrives" },
        { step: "run", timeoutMs: 20_000 },
      );
      expect(r.stdout).toBe("stdin arrives .\n");
      const src = fs.mkdtempSync(path.join(dir, "hr-src-"));
      fs.writeFileSync(path.join(src, "f"), "F");
      await conn.rsync(`${src}/`, { remote: path.join(dir, "hr-dest") }, { step: "rsync" });
      expect(fs.readFileSync(path.join(dir, "hr-dest", "f"), "utf8")).toBe("F");
      expect(fs.existsSync(`${marker}.remote`)).toBe(false);
      expect(fs.existsSync(`${marker}.local`)).toBe(false);

      // What ssh itself makes of sparkform's options next to that config (`ssh -G`).
      const g = sshG([
        ...sshOptions(t, conn.files, { capabilities: sshCapabilities() }),
        ...sshDestination(t),
      ]);
      expect(g.get("knownhostscommand")).toBeUndefined(); // none
      expect(g.get("proxyjump")).toBeUndefined();
      expect(g.get("proxycommand")).toBeUndefined();
      expect(g.get("remotecommand")).toBeUndefined();
      expect(Object.fromEntries([...g].filter(([k]) => OVERRIDDEN.includes(k)))).toEqual({
        verifyhostkeydns: "false",
        stricthostkeychecking: "true",
        userknownhostsfile: conn.files.knownHosts,
        globalknownhostsfile: "/dev/null",
        hostkeyalias: "sparkform.hostile-run",
        updatehostkeys: "false",
        permitlocalcommand: "no",
        forwardagent: "no",
        forwardx11: "no",
        sessiontype: "default",
        stdinnull: "no",
        identitiesonly: "yes",
        batchmode: "yes",
      });
    });

    it("the node-to-peer ssh reads no ssh_config and carries the same overrides", () => {
      const argv = peerSshArgv(node, "10.100.64.2", ".cache/sparkform/kh");
      expect(argv.slice(0, 3)).toEqual(["ssh", "-F", "/dev/null"]);
      const g = sshG(argv.slice(1));
      expect(g.get("knownhostscommand")).toBeUndefined();
      expect(g.get("proxyjump")).toBeUndefined();
      expect(g.get("remotecommand")).toBeUndefined();
      expect(g.get("verifyhostkeydns")).toBe("false");
      expect(g.get("stricthostkeychecking")).toBe("true");
      expect(g.get("userknownhostsfile")).toBe(".cache/sparkform/kh");
      expect(g.get("globalknownhostsfile")).toBe("/dev/null");
      expect(g.get("forwardagent")).toBe("no");
    });
  });

  describe("item 9: a peer copy forwards only the cluster's key", () => {
    const copy = (dest: string, src: string, body = "") => ({
      dest,
      source: src,
      // What the forwarded agent offers, seen from the node during the copy.
      body: `ssh-add -l > "$DST/.agent-keys" 2>&1 || true\nrsync -a -s -e "$RSH" -- "$SRC/" "$DST/"\n${body}`,
      step: "copy from peer",
      display: "rsync peer over the fabric",
      timeoutMs: 60_000,
    });
    const relayNever = async () => {
      throw new Error("relayed, but a fabric copy was expected");
    };

    it("during a copy, ssh-add -l through the forwarded socket lists exactly one key: the cluster's", async () => {
      const src = fs.mkdtempSync(path.join(dir, "fwd-src-"));
      fs.writeFileSync(path.join(src, "a"), "A");
      // The operator's agent holds the cluster key and another one.
      const other = path.join(dir, "operator-other");
      keygen(other);
      const agentDir = fs.mkdtempSync(path.join(dir, "agent-"));
      const operator = await startSshAgent(agentDir, other);
      agents.push(operator);
      execFileSync("ssh-add", ["-q", path.join(dir, "client")], {
        env: { ...process.env, SSH_AUTH_SOCK: operator.socket },
      });
      expect(
        execFileSync("ssh-add", ["-l"], {
          env: { ...process.env, SSH_AUTH_SOCK: operator.socket },
          encoding: "utf8",
        })
          .trim()
          .split("\n"),
      ).toHaveLength(2);
      const clientFp = fingerprint(path.join(dir, "client.pub"));
      const peer = { target: { ...node, name: "peer" }, fabricAddress: "127.0.0.1" };
      const dest = path.join(dir, "fwd-dest");
      const by = await withAgentSocket(operator.socket, () =>
        copyFromPeerOrRelay(openNode(node), peer, {
          fabric: copy(dest, src),
          relay: relayNever,
          stagingPrefix: "sf-hard-",
        }),
      );
      expect(by).toBe("fabric");
      const keys = fs.readFileSync(path.join(dest, ".agent-keys"), "utf8").trim().split("\n");
      expect(keys).toHaveLength(1);
      expect(keys[0]).toContain(clientFp);
      expect(fs.readFileSync(path.join(dest, "a"), "utf8")).toBe("A");
      // The private agent is gone with the copy: no socket left in the session directory.
      expect(fs.readdirSync(sessionDir()).filter((f) => f.startsWith("a-"))).toEqual([]);
    });

    it("a privateKey (secret) goes into the private agent the same way", async () => {
      const src = fs.mkdtempSync(path.join(dir, "pk-src-"));
      fs.writeFileSync(path.join(src, "b"), "B");
      const viaSecret: SshTarget = {
        ...node,
        name: "secret-peer",
        identityFile: undefined,
        privateKey: fs.readFileSync(path.join(dir, "client"), "utf8"),
      };
      const dest = path.join(dir, "pk-dest");
      // The operator's agent holds some other key only.
      const other = path.join(dir, "operator-only");
      keygen(other);
      const operator = await startSshAgent(fs.mkdtempSync(path.join(dir, "agent-")), other);
      agents.push(operator);
      const by = await withAgentSocket(operator.socket, () =>
        copyFromPeerOrRelay(
          openNode(viaSecret),
          { target: viaSecret },
          { fabric: copy(dest, src), relay: relayNever, stagingPrefix: "sf-hard-" },
        ),
      );
      expect(by).toBe("fabric");
      const keys = fs.readFileSync(path.join(dest, ".agent-keys"), "utf8").trim().split("\n");
      expect(keys).toHaveLength(1);
      expect(keys[0]).toContain(fingerprint(path.join(dir, "client.pub")));
    });

    it("without an agent, without a key of its own, or with a passphrase-protected one, nothing is forwarded", async () => {
      expect(await withAgentSocket(undefined, async () => forwardableKey(node))).toEqual({
        reason:
          "no ssh agent on the control node (SSH_AUTH_SOCK): copies are relayed through it; with " +
          "one running, nodes copy from each other with a private agent holding only the cluster's key",
      });
      const agent = await startSshAgent(
        fs.mkdtempSync(path.join(dir, "agent-")),
        path.join(dir, "client"),
      );
      agents.push(agent);
      await withAgentSocket(agent.socket, async () => {
        const agentOnly: SshTarget = { ...node, name: "agent-only", identityFile: undefined };
        expect(forwardableKey(agentOnly)).toEqual({
          reason:
            `node "agent-only" has no identityFile or privateKey of sparkform's own, and the ` +
            "operator's agent is never forwarded",
        });
        const locked = path.join(dir, "locked");
        keygen(locked, "a passphrase");
        expect(forwardableKey({ ...node, name: "locked", identityFile: locked })).toEqual({
          reason: `node "locked" key file ${locked} needs a passphrase (only the operator's agent holds it decrypted)`,
        });
        // Asked to forward anyway, the connection refuses before connecting, saying why.
        const e = await caught(
          openNode(node).forwardAgentOnce(["ssh-add", "-l"], { step: "forward" }, agentOnly),
        );
        expect(e.kind).toBe("spawn");
        expect(e.message).toContain('no agent forwarded: node "agent-only" has no identityFile');
      });
    });
  });

  describe("item 11: children get a minimal environment", () => {
    it("ssh, rsync, ssh-agent, git and python3 started by sparkform never see PULUMI_CONFIG or a secret", async () => {
      const CANARY = "sf-canary-5b1c9e";
      // Wrappers in front of the real tools record the environment each one was started with.
      const bin = fs.mkdtempSync(path.join(dir, "bin-"));
      const log = fs.mkdtempSync(path.join(dir, "envlog-"));
      const tools = ["ssh", "rsync", "git", "python3", "ssh-agent", "ssh-add", "ssh-keygen"];
      for (const t of tools) {
        const real = execFileSync("sh", ["-c", `command -v ${t}`], { encoding: "utf8" }).trim();
        fs.writeFileSync(
          path.join(bin, t),
          `#!/bin/sh\nenv > "${log}/${t}.$$"\nexec ${real} "$@"\n`,
          { mode: 0o755 },
        );
      }
      // Node-to-node copies ride an agent only when the operator runs one.
      const agent = await startSshAgent(
        fs.mkdtempSync(path.join(dir, "agent-")),
        path.join(dir, "client"),
      );
      agents.push(agent);
      const saved = { ...process.env };
      process.env.SSH_AUTH_SOCK = agent.socket;
      process.env.PATH = `${bin}:${process.env.PATH ?? ""}`;
      // The control digest runs the system's python3 by its path, not PATH's (pyenv shims):
      // point it at the recording wrapper the documented way.
      process.env.SPARKFORM_PYTHON = path.join(bin, "python3");
      process.env.PULUMI_CONFIG = JSON.stringify({
        "sparkform:privateKey": `-----BEGIN OPENSSH PRIVATE KEY-----${CANARY}`,
        "sparkform:hfToken": `hf_${CANARY}`,
      });
      process.env.HF_TOKEN = `hf_${CANARY}`;
      process.env.AWS_SECRET_ACCESS_KEY = CANARY;
      try {
        const t: SshTarget = { ...node, name: "env-canary" };
        const conn = openNode(t);
        expect((await conn.run(["echo", "ran"], { step: "env" })).stdout).toBe("ran\n");
        const src = fs.mkdtempSync(path.join(dir, "env-src-"));
        fs.writeFileSync(path.join(src, "x"), "x");
        await conn.rsync(`${src}/`, { remote: path.join(dir, "env-dest") }, { step: "env rsync" });
        await copyFromPeerOrRelay(
          conn,
          { target: { ...t, name: "env-peer" }, fabricAddress: "127.0.0.1" },
          {
            fabric: {
              dest: path.join(dir, "env-fabric"),
              source: src,
              body: 'rsync -a -s -e "$RSH" -- "$SRC/" "$DST/"',
              step: "env copy",
              display: "copy",
              timeoutMs: 60_000,
            },
            relay: async () => {
              throw new Error("expected a fabric copy");
            },
            stagingPrefix: "sf-hard-",
          },
        );
        execFileSync("git", ["init", "-q", src], { env: saved });
        execFileSync("git", ["-C", src, "add", "x"], { env: saved });
        execFileSync(
          "git",
          ["-C", src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
          { env: saved },
        );
        expect(treeCommit(src)).toMatch(/^[0-9a-f]{40}$/);
        expect(localTreeDigest(src, []).digest).toMatch(/^[0-9a-f]{64}$/);
      } finally {
        for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
        Object.assign(process.env, saved);
      }
      const seen = fs.readdirSync(log);
      for (const t of tools)
        expect(
          seen.some((f) => f.startsWith(`${t}.`)),
          t,
        ).toBe(true);
      for (const f of seen) {
        const env = fs.readFileSync(path.join(log, f), "utf8");
        expect(env, f).not.toContain(CANARY);
        expect(env, f).not.toMatch(/^PULUMI_CONFIG=/m);
        expect(env, f).toMatch(/^PATH=/m);
      }
    });
  });

  describe("item 12: every remote step is bounded", () => {
    it("a node whose sshd accepts, sends its banner and stalls fails within the keepalive bound, saying so", async () => {
      const stalled = await stallingServer();
      const { port } = stalled;
      const e = await caught(
        openNode({ ...node, name: "stalled", port }).run(["true"], { step: "fact sheet" }),
      );
      // ServerAliveInterval 15 s × ServerAliveCountMax 3 in the key exchange, once (not once for
      // the master and again for the command): one connection, the bound in the message.
      expect(stalled.connections()).toBe(1);
      expect(e.kind).toBe("stalled");
      expect(e.message).toMatch(
        new RegExp(
          `^\\[stalled\\] step "fact sheet" stalled: ${node.user}@127\\.0\\.0\\.1:${port} accepted the connection and then stopped answering\\n`,
        ),
      );
      expect(e.message).toContain("Log in on the node's console");
      expect(e.message).toContain("ssh: no answer from the node for 4"); // 45 or 46 s
      expect(e.message).toContain("(keepalive bound 15 s × 3)");
    }, 90_000);

    it("a step's own limit holds while connecting, for commands and rsync", async () => {
      const { port } = await stallingServer();
      const t: SshTarget = { ...node, name: "stalled-short", port };
      for (const attempt of [
        () => openNode(t).run(["true"], { step: "mkdir tree", timeoutMs: 3000 }),
        () => openNode(t).rsync(dir, { remote: "x" }, { step: "rsync tree", timeoutMs: 3000 }),
      ]) {
        const e = await caught(attempt());
        // Ended by the step's own 3 s, not by the keepalive bound (that would be "stalled").
        expect(e.kind).toBe("timeout");
        expect(e.message).toMatch(
          /^\[stalled-short\] step "(mkdir|rsync) tree" timed out after 3000 milliseconds\n/,
        );
        expect(e.message).toContain("Check that the node answers");
      }
    }, 30_000);

    it("a session that hangs after login: a command ends at its limit, an rsync at the contact bound", async () => {
      // A real sshd whose ForceCommand never answers: login succeeds, then nothing happens.
      const port = await startSshd("hang", ["ForceCommand exec sleep 90"]);
      const t: SshTarget = { ...node, name: "hung-shell", port };
      const e = await caught(openNode(t).run(["echo", "hi"], { step: "probe", timeoutMs: 2000 }));
      // Ended by its own 2 s ("timeout"), not by the contact bound ("stalled").
      expect(e.kind).toBe("timeout");
      expect(e.message).toMatch(/^\[hung-shell\] step "probe" timed out after 2000 milliseconds\n/);
      // With no limit given (an rsync's default is hours, for large transfers), a fresh
      // connection's first contact still ends within CONTACT_TIMEOUT_MS: a login that never
      // reaches a working session is a stalled node, not a long transfer.
      const r = await caught(
        openNode({ ...t, name: "hung-shell-rsync" }).rsync(
          `${dir}/`,
          { remote: "x" },
          {
            step: "rsync tree",
          },
        ),
      );
      // Ended by the contact bound, which the message names.
      expect(r.kind).toBe("stalled");
      expect(r.message).toContain("ssh: no working session within 60 s");
      expect(r.message).toMatch(
        /^\[hung-shell-rsync\] step "rsync tree" stalled: .* accepted the connection and then stopped answering\n {2}command: rsync -a -s -z '--timeout=120' -- /,
      );
    }, 100_000);

    it("a step that times out on the control node also ends its process on the node", async () => {
      const pidFile = path.join(dir, "sleeper.pid");
      const conn = openNode(node);
      await conn.run(["true"], { step: "warm" });
      // The limit must pass while the script runs. A loaded machine may not have started the
      // session within 1.5 s: then the limit doubles, until the script had begun (no speed is
      // assumed of this machine).
      for (let limitMs = 1500; ; limitMs *= 2) {
        fs.rmSync(pidFile, { force: true });
        const e = await caught(
          conn.run(
            { script: 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1"; exec sleep 300', args: [pidFile] },
            { step: "slow step", timeoutMs: limitMs },
          ),
        );
        expect(e.kind).toBe("timeout");
        if (fs.existsSync(pidFile)) break;
      }
      const pid = Number(fs.readFileSync(pidFile, "utf8"));
      expect(pid).toBeGreaterThan(1);
      // The node's limit is the control node's plus 2 s (rounded up to whole seconds): 4 s at
      // 1.5 s. It ends there, however long that takes here (the sleep alone would run 300 s,
      // past the test's own limit).
      while (alive(pid)) await new Promise((r) => setTimeout(r, 200));
      expect(alive(pid)).toBe(false);
    }, 120_000);
  });
});

/** The `ssh -G` keys the overrides set (compared exactly). */
const OVERRIDDEN = [
  "verifyhostkeydns",
  "stricthostkeychecking",
  "userknownhostsfile",
  "globalknownhostsfile",
  "hostkeyalias",
  "updatehostkeys",
  "permitlocalcommand",
  "forwardagent",
  "forwardx11",
  "sessiontype",
  "stdinnull",
  "identitiesonly",
  "batchmode",
];
