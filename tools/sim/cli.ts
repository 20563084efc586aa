// `npx sparkform sim <verb>`: the command-line face of tools/sim/index.ts.
import {
  readSimCluster,
  simDown,
  simExec,
  simLink,
  simStart,
  simStatus,
  simStop,
  simUp,
  type SimCluster,
  type SimStatus,
} from "./index";
import { clusterPath } from "./state";

const usage = `usage: sparkform sim <verb> (as root)
  up [--nodes N] [--json]        bring the cluster up (N = 2..4, default 2); prints the stack values
  status [--json]                each node: running, ssh, linger, user manager, fabric link + TCP RTT
  down                           stop everything, remove every namespace, link, bridge and mount
  stop <node> | start <node>     power a node off / on
  link <a> <b> up|down           cut or restore the fabric between two nodes (N > 2: <node> switch)
  exec <node> [--user U] -- cmd  run a command inside a node (root unless --user)
  info [--json]                  print the recorded cluster description (no checks)
state: $SPARKFORM_STATE_DIR (default <repo>/.sparkform)/sim; image cache: $SPARKFORM_CACHE_DIR/images`;

class UsageError extends Error {}

const out = (s: string) => process.stdout.write(s.endsWith("\n") ? s : `${s}\n`);

function takeFlag(args: string[], flag: string): boolean {
  const i = args.indexOf(flag);
  if (i < 0) return false;
  args.splice(i, 1);
  return true;
}

function takeOption(args: string[], opt: string): string | undefined {
  const i = args.findIndex((a) => a === opt || a.startsWith(`${opt}=`));
  if (i < 0) return undefined;
  const a = args[i] as string;
  if (a.includes("=")) {
    args.splice(i, 1);
    return a.slice(opt.length + 1);
  }
  const v = args[i + 1];
  if (v === undefined) throw new UsageError(`${opt} needs a value`);
  args.splice(i, 2);
  return v;
}

function noMore(args: string[]): void {
  if (args.length) throw new UsageError(`unexpected argument ${JSON.stringify(args[0])}`);
}

export function formatCluster(c: SimCluster): string {
  const lines = [
    `run ${c.runId}: ${c.nodes.length} nodes, fabric ${c.fabricTopology} ${c.fabricSubnet} (MTU ${c.fabricMtu}), mgmt ${c.mgmtSubnet} on ${c.mgmtBridge}`,
    `control node address (for servers the nodes reach): ${c.controlAddress}`,
    "",
    "node      host (mgmt)      port  user   fabric address   host key",
  ];
  for (const n of c.nodes) {
    lines.push(
      `${n.name.padEnd(9)} ${n.mgmtAddress.padEnd(16)} ${String(n.sshPort).padEnd(5)} ${n.user.padEnd(6)} ${n.fabricAddress.padEnd(16)} ${n.hostKey}`,
    );
  }
  lines.push(
    "",
    `cluster.json     ${clusterPath()}`,
    `ssh_config       ${c.sshConfigPath}`,
    `known_hosts      ${c.knownHostsPath}`,
    `ssh key          ${c.sshKeyPath}`,
    `stack config     ${c.stackConfigPath}`,
    `toolchain        ${c.toolchain.node}:${c.toolchain.path} (${c.toolchain.probe} → ${c.toolchain.expect})`,
    "",
    `try: ssh -F ${c.sshConfigPath} ${c.nodes[0]?.name ?? "spark-1"} hostname`,
  );
  return lines.join("\n");
}

export function formatStatus(st: SimStatus): string {
  if (!st.up) {
    return `no simulated cluster is up (state dir ${st.stateDir}${st.phase ? `, unfinished run ${st.runId}` : ""})`;
  }
  const lines = [
    `run ${st.runId}${st.cutLinks.length ? `, cut links: ${st.cutLinks.join(", ")}` : ""}`,
    "node      running  system     ssh   linger  user-mgr  fabric   tcp rtt to peer",
  ];
  for (const n of st.nodes) {
    const rtt = n.fabric.rtt
      ? n.fabric.rtt.error
        ? `${n.fabric.peer}: ${n.fabric.rtt.error}`
        : `${n.fabric.peer}: p50 ${n.fabric.rtt.p50Us} µs (min ${n.fabric.rtt.minUs}, ${n.fabric.rtt.samples} samples)`
      : "-";
    lines.push(
      [
        n.name.padEnd(9),
        (n.running ? "yes" : "no").padEnd(8),
        (n.systemState ?? "-").padEnd(10),
        (n.sshReachable ? "ok" : "FAIL").padEnd(5),
        (n.linger === undefined ? "-" : n.linger ? "on" : "off").padEnd(7),
        (n.userManager ?? "-").padEnd(9),
        n.fabric.state.padEnd(8),
        rtt,
      ].join(" "),
    );
    if (n.sshError) lines.push(`          ssh: ${n.sshError}`);
  }
  return lines.join("\n");
}

export function healthy(st: SimStatus): boolean {
  return (
    st.up &&
    st.nodes.every(
      (n) =>
        n.running &&
        n.sshReachable &&
        n.linger &&
        n.userManager === "active" &&
        n.fabric.state === "UP",
    )
  );
}

export async function runSimCli(argv: string[]): Promise<number> {
  const args = [...argv];
  const verb = args.shift();
  try {
    switch (verb) {
      case "up": {
        const nodesOpt = takeOption(args, "--nodes");
        const json = takeFlag(args, "--json");
        noMore(args);
        const nodes = nodesOpt === undefined ? undefined : Number(nodesOpt);
        if (nodes !== undefined && !Number.isInteger(nodes))
          throw new UsageError("--nodes takes a number");
        const c = await simUp({ nodes });
        out(json ? JSON.stringify(c, null, 2) : formatCluster(c));
        return 0;
      }
      case "status": {
        const json = takeFlag(args, "--json");
        noMore(args);
        const st = await simStatus();
        out(json ? JSON.stringify(st, null, 2) : formatStatus(st));
        return healthy(st) ? 0 : 1;
      }
      case "info": {
        const json = takeFlag(args, "--json");
        noMore(args);
        const c = readSimCluster();
        if (!c) {
          process.stderr.write("sim: no cluster recorded\n");
          return 1;
        }
        out(json ? JSON.stringify(c, null, 2) : formatCluster(c));
        return 0;
      }
      case "down": {
        noMore(args);
        const r = await simDown();
        out(r.removed.length ? `removed:\n  ${r.removed.join("\n  ")}` : "nothing to remove");
        return 0;
      }
      case "stop":
      case "start": {
        const node = args.shift();
        if (!node) throw new UsageError(`${verb} needs a node name`);
        noMore(args);
        await (verb === "stop" ? simStop(node) : simStart(node));
        out(`${node} ${verb === "stop" ? "stopped" : "started"}`);
        return 0;
      }
      case "link": {
        const [a, b, state, ...rest] = args;
        noMore(rest);
        if (!a || !b || (state !== "up" && state !== "down")) {
          throw new UsageError("link needs <a> <b> up|down");
        }
        await simLink(a, b, state);
        out(`fabric ${a} <-> ${b} ${state}`);
        return 0;
      }
      case "exec": {
        const node = args.shift();
        if (!node) throw new UsageError("exec needs a node name");
        const user = takeOption(args, "--user");
        const dd = args.indexOf("--");
        const cmd = dd >= 0 ? args.slice(dd + 1) : args;
        if (dd > 0) noMore(args.slice(0, dd));
        if (!cmd.length) throw new UsageError("exec needs a command after --");
        const r = await simExec(node, cmd, { user });
        process.stdout.write(r.stdout);
        process.stderr.write(r.stderr);
        return r.exitCode;
      }
      case undefined:
      case "help":
      case "--help":
      case "-h":
        out(usage);
        return verb === undefined ? 2 : 0;
      default:
        throw new UsageError(`unknown verb ${JSON.stringify(verb)}`);
    }
  } catch (e) {
    if (e instanceof UsageError) {
      process.stderr.write(`sim: ${e.message}\n${usage}\n`);
      return 2;
    }
    process.stderr.write(`${e instanceof Error ? e.message : String(e)}\n`);
    return 1;
  }
}
