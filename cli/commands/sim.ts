// `sparkform sim <verb>`: the command-line face of sim/index.ts.
import { parseArgs } from "node:util";
import {
  readSimCluster,
  simDown,
  simExec,
  simLink,
  simRate,
  simStart,
  simStatus,
  simStop,
  simUp,
  type SimCluster,
  type SimStatus,
} from "../../sim/index";
import { fabricLineMbit } from "../../sim/paths";
import { clusterPath } from "../../sim/state";
import { out, UsageError } from "../errors";

export const summary =
  "the simulated cluster: up, status, down, stop, start, link, rate, exec, info";

export const usage = `usage: sparkform sim <verb> (as root)
  up [--nodes N] [--ring] [--json]  bring the cluster up (N = 2..4, default 2); prints the stack values;
                                 --ring: three nodes cabled as a ring (each pair its own veth and /24)
  status [--json]                each node: running, ssh, linger, user manager, fabric link + TCP RTT
  down                           stop everything, remove every namespace, link, bridge and mount
  stop <node> | start <node>     power a node off / on
  link <a> <b> up|down [--rail R]  cut or restore the fabric between two nodes (N > 2: <node> switch),
                                 on one rail (0, 1) or on both; a ring: the pair's one cable
  rate <node> <Mbit/s>|line [--rail R]  shape a node's end of a rail (a slow port), or give it
                                 back its line rate (${fabricLineMbit} Mbit/s); one rail or both
  exec <node> [--user U] -- cmd  run a command inside a node (root unless --user)
  info [--json]                  print the recorded cluster description (no checks)
state: $SPARKFORM_STATE_DIR (default <repo>/.sparkform)/sim; image cache: $SPARKFORM_CACHE_DIR/images`;

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

/** `--rail R` as a number, or undefined for every rail. */
function railOption(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new UsageError("--rail takes a rail number (0 or 1)");
  return Number(value);
}

/** Options and positionals of one verb, strictly parsed (an unknown option is a usage error). */
function verbArgs<O extends Record<string, { type: "string" | "boolean" }>>(
  args: string[],
  options: O,
  positionals: number,
) {
  const parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  if (parsed.positionals.length !== positionals) {
    throw new UsageError(
      `expected ${positionals} argument(s), got ${JSON.stringify(parsed.positionals)}`,
    );
  }
  return parsed;
}

export async function run(argv: string[]): Promise<number> {
  const [verb, ...args] = argv;
  switch (verb) {
    case "up": {
      const { values } = verbArgs(
        args,
        { nodes: { type: "string" }, ring: { type: "boolean" }, json: { type: "boolean" } },
        0,
      );
      const nodes = values.nodes === undefined ? undefined : Number(values.nodes);
      if (nodes !== undefined && !Number.isInteger(nodes)) {
        throw new UsageError("--nodes takes a number");
      }
      const c = await simUp({ nodes, ...(values.ring ? { ring: true } : {}) });
      out(values.json ? JSON.stringify(c, null, 2) : formatCluster(c));
      return 0;
    }
    case "status": {
      const { values } = verbArgs(args, { json: { type: "boolean" } }, 0);
      const st = await simStatus();
      out(values.json ? JSON.stringify(st, null, 2) : formatStatus(st));
      return healthy(st) ? 0 : 1;
    }
    case "info": {
      const { values } = verbArgs(args, { json: { type: "boolean" } }, 0);
      const c = readSimCluster();
      if (!c) throw new Error("no cluster recorded: `sparkform sim up` first");
      out(values.json ? JSON.stringify(c, null, 2) : formatCluster(c));
      return 0;
    }
    case "down": {
      verbArgs(args, {}, 0);
      const r = await simDown();
      out(r.removed.length ? `removed:\n  ${r.removed.join("\n  ")}` : "nothing to remove");
      return 0;
    }
    case "stop":
    case "start": {
      const { positionals } = verbArgs(args, {}, 1);
      const node = positionals[0] as string;
      await (verb === "stop" ? simStop(node) : simStart(node));
      out(`${node} ${verb === "stop" ? "stopped" : "started"}`);
      return 0;
    }
    case "link": {
      const { positionals, values } = verbArgs(args, { rail: { type: "string" } }, 3);
      const [a, b, state] = positionals as [string, string, string];
      if (state !== "up" && state !== "down") throw new UsageError("link needs <a> <b> up|down");
      const rail = railOption(values.rail);
      await simLink(a, b, state, rail);
      out(`fabric ${a} <-> ${b}${rail === undefined ? "" : ` rail ${rail}`} ${state}`);
      return 0;
    }
    case "rate": {
      const { positionals, values } = verbArgs(args, { rail: { type: "string" } }, 2);
      const [node, rate] = positionals as [string, string];
      if (rate !== "line" && !/^\d+(\.\d+)?$/.test(rate))
        throw new UsageError("rate needs <node> <Mbit/s>|line, like `rate spark-1 100 --rail 0`");
      const rail = railOption(values.rail);
      const mbit = rate === "line" ? undefined : Number(rate);
      await simRate(node, mbit, rail);
      out(
        `fabric ${node}${rail === undefined ? "" : ` rail ${rail}`} at ${mbit ?? fabricLineMbit} Mbit/s${mbit === undefined ? " (line rate)" : ""}`,
      );
      return 0;
    }
    case "exec": {
      // Everything after `--` is the node's command, options included.
      const dd = args.indexOf("--");
      const cmd = dd >= 0 ? args.slice(dd + 1) : [];
      const { values, positionals } = verbArgs(
        dd >= 0 ? args.slice(0, dd) : args,
        { user: { type: "string" } },
        1,
      );
      if (!cmd.length) throw new UsageError("exec needs a command after --");
      const r = await simExec(positionals[0] as string, cmd, { user: values.user });
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
}
