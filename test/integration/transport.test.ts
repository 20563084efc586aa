// The SSH transport against a real sshd: a throwaway one on 127.0.0.1 with its own host
// key and authorized key (the simulated cluster was not ready when this was written; the
// same assertions can move onto it). Real ssh, real rsync, real ssh-agent.
import { execFileSync, spawn, spawnSync, type ChildProcess } from "node:child_process";
import * as fs from "node:fs";
import * as net from "node:net";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sessionDir } from "../../components/transport/control-master";
import {
  close,
  openNode,
  rsync,
  run,
  RemoteCommandError,
  SESSIONS_PER_MASTER,
  type SshTarget,
} from "../../components/transport";
import { copyFromPeerOrRelay } from "../../components/peer-copy";
import { requireOrSkip } from "../support/requires";

const SSHD = "/usr/sbin/sshd";
const haveSshd = fs.existsSync(SSHD) && fs.existsSync("/usr/bin/rsync");

let dir: string;
let sshd: ChildProcess | undefined;
let agent: { pid: number; sock: string } | undefined;
let node: SshTarget;
let clientKeyText: string;

function keygen(file: string): string {
  execFileSync("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "", "-f", file]);
  return fs.readFileSync(`${file}.pub`, "utf8").trim();
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

/** An ssh-agent holding the client key (one per file run; afterAll stops it). */
function startAgent(): { pid: number; sock: string } {
  if (agent) return agent;
  const out = execFileSync("ssh-agent", ["-s"], { encoding: "utf8" });
  const sock = /SSH_AUTH_SOCK=([^;]+);/.exec(out)?.[1] ?? "";
  const pid = Number(/SSH_AGENT_PID=(\d+);/.exec(out)?.[1]);
  agent = { pid, sock };
  execFileSync("ssh-add", ["-q", path.join(dir, "client")], {
    env: { ...process.env, SSH_AUTH_SOCK: sock },
  });
  return agent;
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

/** The pid `ssh -O check` reports for the master on `controlPath`, or undefined. */
function masterPid(controlPath: string): number | undefined {
  const r = spawnSync(
    "ssh",
    ["-F", "/dev/null", "-o", `ControlPath=${controlPath}`, "-O", "check", "--", "127.0.0.1"],
    { encoding: "utf8" },
  );
  const m = /Master running \(pid=(\d+)\)/.exec(r.stderr);
  return m ? Number(m[1]) : undefined;
}

/**
 * A remote script printing the pid of the sshd process its session hangs from: sshd forks one
 * per TCP connection, and each session on that connection is its child.
 */
const CONNECTION = {
  script: `p=$$
while [ "$p" -gt 1 ]; do
  case $(cat "/proc/$p/comm") in sshd*) echo "$p"; exit 0 ;; esac
  p=$(awk '/^PPid:/ { print $2 }' "/proc/$p/status")
done
echo none`,
};

async function caught(p: Promise<unknown>): Promise<RemoteCommandError> {
  try {
    await p;
  } catch (e) {
    if (e instanceof RemoteCommandError) return e;
    throw e;
  }
  throw new Error("expected a RemoteCommandError");
}

const HOSTILE = [
  "",
  "two words",
  "it's",
  '"q"',
  "$(id)",
  "`id`",
  "a;b && c | d",
  "line1\nline2",
  "tab\there",
  "*",
  "~",
  "-rf",
  "--",
  "ünïcödé 🚀",
  "\\",
  "%h",
];

describe.skipIf(
  requireOrSkip("sshd and rsync", haveSshd, "the transport runs against a real sshd"),
)("ssh transport against a local sshd", () => {
  beforeAll(async () => {
    dir = fs.mkdtempSync("/tmp/sf-it-");
    const hostPub = keygen(path.join(dir, "host"));
    const clientPub = keygen(path.join(dir, "client"));
    clientKeyText = fs.readFileSync(path.join(dir, "client"), "utf8");
    fs.writeFileSync(path.join(dir, "authorized_keys"), `${clientPub}\n`, { mode: 0o600 });
    const port = await freePort();
    fs.writeFileSync(
      path.join(dir, "sshd_config"),
      [
        `Port ${port}`,
        "ListenAddress 127.0.0.1",
        `HostKey ${dir}/host`,
        `AuthorizedKeysFile ${dir}/authorized_keys`,
        `PidFile ${dir}/sshd.pid`,
        "StrictModes no",
        "UsePAM no",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin prohibit-password",
        "AllowAgentForwarding yes",
        "AllowTcpForwarding yes",
        "LogLevel ERROR",
      ].join("\n") + "\n",
    );
    fs.mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
    sshd = spawn(SSHD, ["-D", "-e", "-f", path.join(dir, "sshd_config")], { stdio: "ignore" });
    await waitForPort(port);
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
    if (agent) process.kill(agent.pid);
    sshd?.kill();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it("runs a command, and hostile arguments arrive intact as argv", async () => {
    const r = await run(node, ["printf", "%s\\0", ...HOSTILE], { step: "argv round trip" });
    expect(r.exitCode).toBe(0);
    expect(r.stdout.split("\0").slice(0, -1)).toEqual(HOSTILE);
  });

  it("runs many commands to one node at once, at most SESSIONS_PER_MASTER on the master", async () => {
    // A refresh reads every resource of a node at once. Beyond sshd's MaxSessions (10) the
    // master refuses a session and ssh's own fallback connections then meet MaxStartups.
    // Each command marks itself running, waits, counts the running ones, and unmarks.
    const marks = fs.mkdtempSync(path.join(dir, "marks-"));
    const runs = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        run(
          node,
          {
            script:
              'touch "$1/$2.run"; sleep 1; n=$(ls "$1" | grep -c "[.]run$"); rm "$1/$2.run"; echo "$2 $n"',
            args: [marks, String(i)],
          },
          { step: `parallel ${i}` },
        ),
      ),
    );
    const lines = runs.map((r) => r.stdout.trim().split(" ").map(Number));
    expect(lines.map(([i]) => i)).toEqual(Array.from({ length: 24 }, (_, i) => i));
    const running = lines.map(([, n]) => n ?? 0);
    expect(Math.max(...running)).toBeLessThanOrEqual(SESSIONS_PER_MASTER);
    expect(Math.max(...running)).toBeGreaterThan(1);
  });

  it("runs under the environment contract: empty env, explicit PATH, non-login", async () => {
    const r = await run(
      node,
      {
        script: 'env | LC_ALL=C sort; echo "args=$#:$1"',
        args: ["$HOME"],
        env: { CUDA_HOME: "/usr/local/cuda", CACHE: { home: ".cache/x y" } },
        path: [{ home: ".asdf/bin" }],
      },
      { step: "env" },
    );
    const env = Object.fromEntries(
      r.stdout
        .trim()
        .split("\n")
        .filter((l) => l.includes("=") && !l.startsWith("args="))
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    const home = os.homedir();
    expect(env.PATH).toBe(
      `${home}/.asdf/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
    );
    expect(env).toMatchObject({
      HOME: home,
      LANG: "C.UTF-8",
      CUDA_HOME: "/usr/local/cuda",
      CACHE: `${home}/.cache/x y`,
      USER: node.user,
    });
    // Nothing from the ssh session or a profile leaks in.
    expect(Object.keys(env).sort()).toEqual(expect.arrayContaining(["HOME", "PATH"]));
    for (const leaked of ["SSH_CONNECTION", "SSH_CLIENT", "MAIL", "SHELL", "TERM"])
      expect(env).not.toHaveProperty(leaked);
    expect(r.stdout).toContain("args=1:$HOME");
  });

  it("delivers secret env on stdin, then the caller's stdin intact", async () => {
    const secret = "hf_s3cr3t 'quoted' $(x)";
    const r = await run(
      node,
      {
        script: 'printf "%s|" "$TOKEN"; cat',
        env: { TOKEN: { secret } },
        stdin: "line one\nline two\n",
      },
      { step: "secret" },
    );
    expect(r.stdout).toBe(`${secret}|line one\nline two\n`);
  });

  it("streams output lines as they arrive", async () => {
    const lines: string[] = [];
    await run(
      node,
      { script: "echo one; echo two >&2; echo three" },
      { step: "stream", onLine: (l, s) => lines.push(`${s}:${l}`) },
    );
    expect(lines).toEqual(expect.arrayContaining(["stdout:one", "stderr:two", "stdout:three"]));
  });

  it("fails with a message naming node, step, command and last output lines", async () => {
    const e = await caught(
      run(
        node,
        { script: 'for i in $(seq 1 30); do echo "line $i"; done; echo "boom" >&2; exit 3' },
        { step: "build" },
      ),
    );
    expect(e.kind).toBe("exit");
    expect(e.exitCode).toBe(3);
    expect(e.message).toMatch(
      /^\[local\] step "build" failed with exit code 3\n {2}command: sh -c 'for i in/,
    );
    // The last 20 lines of both streams in arrival order (ssh may reorder across streams
    // by a line or two, hence no exact boundary on "boom").
    const tail = e.message.split("  last output lines:\n")[1] ?? "";
    expect(tail.split("\n")).toHaveLength(20);
    expect(tail).toContain("    boom");
    expect(tail).toContain("    line 30");
    expect(tail).not.toContain("line 10\n");
  });

  it("treats okExitCodes as results", async () => {
    const r = await run(node, ["test", "-e", "/nonexistent"], {
      step: "probe",
      okExitCodes: [0, 1],
    });
    expect(r.exitCode).toBe(1);
  });

  it("times out with a clear message", async () => {
    const e = await caught(run(node, ["sleep", "10"], { step: "slow", timeoutMs: 1000 }));
    expect(e.kind).toBe("timeout");
    expect(e.message).toMatch(
      /^\[local\] step "slow" timed out after 1000 milliseconds\n {2}command: sleep 10/,
    );
  });

  it("refuses a host whose key is not the pinned one", async () => {
    const other = keygen(path.join(dir, "other"));
    const e = await caught(
      run({ ...node, name: "impostor", hostKey: other }, ["true"], { step: "connect" }),
    );
    expect(e.kind).toBe("host-key");
    expect(e.message).toContain(
      `[impostor] step "connect" could not connect to ${node.user}@127.0.0.1:${node.port}: host key verification failed`,
    );
    expect(e.message).toContain("host key checking is never disabled");
  });

  it("fails fast on a port where nothing listens", async () => {
    const e = await caught(
      run({ ...node, name: "down", port: await freePort() }, ["true"], { step: "connect" }),
    );
    expect(e.kind).toBe("unreachable");
    expect(e.message).toMatch(/^\[down\] step "connect" could not connect to .*: unreachable\n/);
    // Refused at once, not waited out: no timeout of ssh's or of the step's.
    expect(e.message).toContain("Connection refused");
    expect(e.message).not.toMatch(/timed out/);
  });

  it("fails within ConnectTimeout on an address that does not answer", async () => {
    // ssh as the transport starts it, each argv recorded: the bound is ssh's own ConnectTimeout.
    const bin = fs.mkdtempSync(path.join(dir, "bin-"));
    const argv = path.join(bin, "argv");
    fs.writeFileSync(
      path.join(bin, "ssh"),
      `#!/bin/sh\necho "$*" >> '${argv}'\nexec /usr/bin/ssh "$@"\n`,
      { mode: 0o755 },
    );
    const saved = process.env.PATH;
    process.env.PATH = `${bin}:${saved ?? "/usr/bin:/bin"}`;
    let e: RemoteCommandError;
    try {
      // TEST-NET-1: never routed; either no route at once, or silence until ConnectTimeout.
      e = await caught(
        run({ ...node, name: "void", host: "192.0.2.1", port: 22 }, ["true"], {
          step: "connect",
          connectTimeoutS: 2,
        }),
      );
    } finally {
      process.env.PATH = saved;
    }
    expect(e.kind).toBe("unreachable");
    expect(e.message).toContain('[void] step "connect" could not connect to');
    // Every ssh started for the node was given the step's 2 s (not the default, not none).
    const toVoid = fs
      .readFileSync(argv, "utf8")
      .split("\n")
      .filter((l) => l.includes(" -- 192.0.2.1 "));
    expect(toVoid.length).toBeGreaterThan(0);
    for (const l of toVoid) expect(l).toContain("-o ConnectTimeout=2 ");
  });

  it("uses a private key given as a secret string and never shows it", async () => {
    const viaSecret: SshTarget = {
      ...node,
      name: "secret-key",
      identityFile: undefined,
      privateKey: clientKeyText,
    };
    const ok = await run(viaSecret, ["echo", "hi"], { step: "secret key" });
    expect(ok.stdout).toBe("hi\n");
    // The node echoes the key back and fails: the message must not carry it.
    const keyLine = clientKeyText.split("\n")[1] ?? "";
    const e = await caught(
      run(
        viaSecret,
        { script: 'cat "$1"; exit 4', args: [path.join(dir, "client")] },
        { step: "leak" },
      ),
    );
    expect(e.message).not.toContain(keyLine);
    expect(e.message).not.toContain(clientKeyText);
    expect(e.message).toContain("***");
    // A key the node does not accept: an auth failure, still without the key.
    const wrongKey =
      (keygen(path.join(dir, "wrong")), fs.readFileSync(path.join(dir, "wrong"), "utf8"));
    const bad = await caught(
      run({ ...viaSecret, name: "wrong-key", privateKey: wrongKey }, ["true"], { step: "connect" }),
    );
    expect(bad.kind).toBe("auth");
    expect(bad.message).not.toContain(wrongKey.split("\n")[1] ?? "");
  });

  it("multiplexes over one ControlMaster per node, and close() ends it", async () => {
    const first = (await run(node, CONNECTION, { step: "warm" })).stdout;
    const { controlPath } = openNode(node).files;
    expect(fs.statSync(controlPath).isSocket()).toBe(true);
    expect(fs.statSync(sessionDir()).mode & 0o777).toBe(0o700);
    const master = masterPid(controlPath);
    expect(master).toBeGreaterThan(1);
    // A connection's sshd, not the listening one every connection forks from.
    expect(first).toMatch(/^\d+\n$/);
    expect(Number(first)).not.toBe(sshd?.pid);
    const seen: string[] = [];
    for (let i = 0; i < 5; i++) seen.push((await run(node, CONNECTION, { step: "reuse" })).stdout);
    // Six commands, one TCP connection, one master: the same sshd served each session.
    expect(seen).toEqual(Array.from({ length: 5 }, () => first));
    expect(masterPid(controlPath)).toBe(master);
    const d = sessionDir();
    close();
    expect(fs.existsSync(d)).toBe(false);
    expect((await run(node, ["echo", "again"], { step: "after close" })).stdout).toBe("again\n");
    // After close, a new master: another connection (the measure tells connections apart).
    expect((await run(node, CONNECTION, { step: "after close" })).stdout).not.toBe(first);
  });

  it("reaches the node through a pinned jump host", async () => {
    const viaJump: SshTarget = {
      ...node,
      name: "behind-jump",
      jump: {
        host: "127.0.0.1",
        port: node.port,
        user: node.user,
        hostKey: node.hostKey,
        identityFile: node.identityFile,
      },
    };
    expect((await run(viaJump, ["echo", "hopped"], { step: "jump" })).stdout).toBe("hopped\n");
    const other = keygen(path.join(dir, "other-jump"));
    const e = await caught(
      run({ ...viaJump, name: "bad-jump", jump: { ...viaJump.jump!, hostKey: other } }, ["true"], {
        step: "jump",
      }),
    );
    expect(e.message).toMatch(/Host key verification failed|unreachable|host key/);
  });

  it("rsyncs a tree with hostile names both ways, with --delete and excludes", async () => {
    const src = path.join(dir, "tree src");
    fs.mkdirSync(path.join(src, "sub dir"), { recursive: true });
    fs.mkdirSync(path.join(src, "vendor", ".git"), { recursive: true });
    const names = ["a b.txt", "it's.txt", "$(id).txt", "-rf", "ünï.txt", "*"];
    for (const n of names) fs.writeFileSync(path.join(src, "sub dir", n), n);
    fs.writeFileSync(path.join(src, "vendor", ".git", "HEAD"), "x");
    const remoteDir = `${path.relative(os.homedir(), dir)}/remote tree`;
    // Seed a stale file that --delete must remove.
    await run(
      node,
      { script: 'mkdir -p "$1" && touch "$1/stale"', args: [path.join(dir, "remote tree")] },
      { step: "seed" },
    );
    await rsync(
      node,
      `${src}/`,
      { remote: `~/${remoteDir}` },
      { step: "sync tree", delete: true, excludes: ["vendor/.git"] },
    );
    const listing = (
      await run(
        node,
        {
          script: 'cd "$1" && find . -type f | LC_ALL=C sort',
          args: [path.join(dir, "remote tree")],
        },
        { step: "list" },
      )
    ).stdout;
    expect(listing.trim().split("\n")).toEqual(names.map((n) => `./sub dir/${n}`).sort());
    const back = path.join(dir, "back");
    await rsync(node, { remote: `~/${remoteDir}/sub dir/` }, `${back}/`, { step: "pull" });
    expect(fs.readdirSync(back).sort()).toEqual([...names].sort());
    expect(fs.readFileSync(path.join(back, "$(id).txt"), "utf8")).toBe("$(id).txt");
  });

  it("rejects option-like and wildcard rsync operands before running anything", async () => {
    await expect(rsync(node, "-e sh", { remote: "x" }, { step: "bad" })).rejects.toThrow(
      /starts with "-"/,
    );
    await expect(rsync(node, "/tmp/x", { remote: "~/a*" }, { step: "bad" })).rejects.toThrow(
      /wildcard/,
    );
    await expect(
      run({ ...node, host: "-oProxyCommand=sh" }, ["true"], { step: "bad" }),
    ).rejects.toThrow(/starts with "-"/);
  });

  it("forwards the agent for one command only", async () => {
    const { sock } = startAgent();
    const saved = process.env.SSH_AUTH_SOCK;
    process.env.SSH_AUTH_SOCK = sock;
    try {
      const fwd = await openNode(node).forwardAgentOnce(["ssh-add", "-l"], { step: "forwarded" });
      expect(fwd.stdout).toContain("ED25519");
      // The multiplexed path never forwards: ssh-add finds no agent there.
      const plain = await run(
        node,
        { script: 'ssh-add -l; echo "rc=$?"' },
        { step: "plain", okExitCodes: [0] },
      );
      expect(plain.stdout).toMatch(/rc=2/);
    } finally {
      process.env.SSH_AUTH_SOCK = saved;
    }
  });

  it("opens a node once: one connection to sshd carries many commands and rsyncs", async () => {
    // A TCP relay in front of sshd counts the connections ssh makes: the master's, only.
    let accepted = 0;
    const relay = net.createServer((c) => {
      accepted++;
      const up = net.connect(node.port, "127.0.0.1");
      c.pipe(up).pipe(c);
      c.on("error", () => up.destroy());
      up.on("error", () => c.destroy());
    });
    await new Promise<void>((resolve) => relay.listen(0, "127.0.0.1", resolve));
    const counted: SshTarget = {
      ...node,
      name: "counted",
      port: (relay.address() as net.AddressInfo).port,
    };
    try {
      const conn = openNode(counted);
      expect(openNode({ ...counted })).toBe(conn);
      const src = fs.mkdtempSync(path.join(dir, "once-"));
      fs.writeFileSync(path.join(src, "f"), "x");
      const results = await Promise.all([
        ...Array.from({ length: 12 }, (_, i) =>
          conn.run(["echo", String(i)], { step: `once ${i}` }),
        ),
        conn.rsync(`${src}/`, { remote: path.join(dir, "once-dest") }, { step: "once rsync" }),
        run(counted, ["echo", "free"], { step: "free function" }),
      ]);
      expect(results.slice(0, 12).map((r) => r.stdout)).toEqual(
        Array.from({ length: 12 }, (_, i) => `${i}\n`),
      );
      expect(results[13]?.stdout).toBe("free\n");
      expect(fs.readFileSync(path.join(dir, "once-dest", "f"), "utf8")).toBe("x");
      expect(accepted).toBe(1);
      // Closing ends the master and removes the connection's files; the next open is new.
      conn.close();
      expect(fs.existsSync(conn.files.controlPath)).toBe(false);
      expect(fs.existsSync(conn.files.knownHosts)).toBe(false);
      await expect(conn.run(["true"], { step: "closed" })).rejects.toThrow(
        'the connection to node "counted" was closed',
      );
      const again = openNode(counted);
      expect(again).not.toBe(conn);
      expect((await again.run(["echo", "reopened"], { step: "reopen" })).stdout).toBe("reopened\n");
      expect(accepted).toBe(2);
    } finally {
      openNode(counted).close();
      relay.close();
    }
  });

  it("a secret key's file lives exactly as long as its connection", async () => {
    const conn = openNode({
      ...node,
      name: "key-file",
      identityFile: undefined,
      privateKey: clientKeyText,
    });
    const keyFile = conn.files.keyFile ?? "";
    expect(fs.statSync(keyFile).mode & 0o777).toBe(0o600);
    expect((await conn.run(["echo", "ok"], { step: "key" })).stdout).toBe("ok\n");
    conn.close();
    expect(fs.existsSync(keyFile)).toBe(false);
  });

  it("copies from a peer over the fabric with an agent, else relays through the control node", async () => {
    // The peer is the same sshd under another name; over the fabric the node ssh-es to it
    // with the forwarded agent and the peer's pinned key, and rsyncs from it.
    const src = path.join(dir, "peer-src");
    fs.mkdirSync(path.join(src, "sub"), { recursive: true });
    fs.writeFileSync(path.join(src, "a"), "A");
    fs.writeFileSync(path.join(src, "sub", "b b"), "B");
    const peer = { target: { ...node, name: "peer" }, fabricAddress: "127.0.0.1" };
    const copyTo = (
      dest: string,
      other: { hostKey?: string; fabricAddress?: string } = {},
      onFabricError?: (e: unknown) => Promise<void>,
    ) =>
      copyFromPeerOrRelay(
        openNode(node),
        {
          target: { ...peer.target, hostKey: other.hostKey ?? node.hostKey },
          fabricAddress: other.fabricAddress ?? peer.fabricAddress,
        },
        {
          fabric: {
            dest,
            source: src,
            body: 'rsync -a -s -e "$RSH" -- "$SRC/" "$DST/"',
            step: "copy from peer",
            display: "rsync peer:peer-src over the fabric",
            timeoutMs: 60_000,
          },
          stagingPrefix: "sf-it-staging-",
          relay: async ({ staging, from, to }) => {
            expect(from.target.name).toBe("peer");
            await from.rsync({ remote: `${src}/` }, `${staging}/`, { step: "fetch from peer" });
            await to.rsync(`${staging}/`, { remote: `${dest}/` }, { step: "push to node" });
          },
          ...(onFabricError ? { onFabricError } : {}),
        },
      );
    const files = (d: string) => [
      fs.readFileSync(path.join(d, "a"), "utf8"),
      fs.readFileSync(path.join(d, "sub", "b b"), "utf8"),
    ];
    const stagings = () =>
      fs.readdirSync(os.tmpdir()).filter((f) => f.startsWith("sf-it-staging-"));
    const pinned = () =>
      fs.existsSync(path.join(os.homedir(), ".cache/sparkform"))
        ? fs
            .readdirSync(path.join(os.homedir(), ".cache/sparkform"))
            .filter((f) => f.startsWith("known_hosts.peer."))
        : [];

    const { sock } = startAgent();
    expect(await withAgentSocket(sock, () => copyTo(path.join(dir, "by-fabric")))).toBe("fabric");
    expect(files(path.join(dir, "by-fabric"))).toEqual(["A", "B"]);
    expect(pinned()).toEqual([]); // the copy's known_hosts file is removed on the node

    expect(await withAgentSocket(undefined, () => copyTo(path.join(dir, "by-relay")))).toBe(
      "relay",
    );
    expect(files(path.join(dir, "by-relay"))).toEqual(["A", "B"]);
    expect(stagings()).toEqual([]);

    // A peer whose key is not the pinned one: the fabric copy fails and says so. A best-effort
    // copy (onFabricError) whose fabric address does not answer is told why and relays instead.
    const impostor = keygen(path.join(dir, "impostor-peer"));
    const e = await caught(
      withAgentSocket(sock, () => copyTo(path.join(dir, "refused"), { hostKey: impostor })),
    );
    // The node's rsync exits 255 like ssh itself, so the kind reads as the node's own connection
    // failing ("host-key"); the output lines name the peer's alias.
    expect(e.message).toContain(`[local] step "copy from peer"`);
    expect(e.message).toContain("Host key for sparkform.peer has changed");
    expect(e.message).toContain("Host key verification failed");
    const seen: unknown[] = [];
    const by = await withAgentSocket(sock, () =>
      copyTo(path.join(dir, "fallback"), { fabricAddress: "127.0.0.2" }, async (err) => {
        seen.push(err);
      }),
    );
    expect(by).toBe("relay");
    expect(seen).toHaveLength(1);
    expect(seen[0]).toBeInstanceOf(RemoteCommandError);
    expect(files(path.join(dir, "fallback"))).toEqual(["A", "B"]);
  });
});
