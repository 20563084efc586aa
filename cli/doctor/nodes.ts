// The checks that read the nodes: reachable with the pinned host key (fast: a short connect
// timeout and an overall limit, all nodes at once), then one read-only probe (clock, linger,
// ports, model files: native/doctor/ports-and-files.py) and the fact sheet (native/node/facts.sh, as
// SparkNode runs it) per node, from which disk space and the fabric's port checks are judged.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import type { PortNeed } from "../../components/config/descriptor";
import type { StackConfigData } from "../../components/stack-config";
import { portChecks } from "../../components/fabric/checks";
import { fabricLinks, fabricThresholds, railsLabel } from "../../components/fabric/config";
import { fixtureRdma } from "../../components/fabric/fixture";
import { liveRdma, portFacts } from "../../components/fabric/ports";
import { modelDir } from "../../components/model/resolve";
import { programCommand } from "../../components/native-script";
import { childEnv } from "../../components/transport";
import { parseFacts, type SparkNodeFacts } from "../../components/node/facts";
import { NodeOutputError } from "../../components/schema/node-json";
import { programJsonParser } from "../../components/schema/program-json";
import { openNode, RemoteCommandError, type SshTarget } from "../../components/transport";
import { DESCRIPTORS } from "../../components/stages";
import { bytes } from "../summary";
import type { Finding } from "./findings";

/** Seconds ssh waits for TCP: a stopped node is reported in a few seconds, not ssh's minutes. */
export const CONNECT_TIMEOUT_S = 3;
/** The whole first command's limit (connect, authenticate, probe). */
export const PROBE_TIMEOUT_MS = 8_000;
/** The fact sheet reads sysfs and runs a few tools. */
export const FACTS_TIMEOUT_MS = 20_000;
/** Clock skew thresholds (seconds): TLS to the hub, make's timestamps, log correlation. */
export const SKEW_WARN_S = 2;
export const SKEW_FAIL_S = 60;

export interface ProbeResult {
  now: number;
  user: string;
  linger: boolean;
  ports: {
    port: number;
    listeners: {
      address: string;
      pid: number | null;
      command: string | null;
      unit: string | null;
    }[];
  }[];
  files: { path: string; exists: boolean; size: number | null }[];
}

/** The probe's program; its output is checked against the schema beside it. */
const PROBE_PROGRAM = "doctor/ports-and-files.py";

export const parseProbe = programJsonParser<ProbeResult>(
  PROBE_PROGRAM,
  (node, p, detail) => new NodeOutputError("doctor's probe output", node, p, detail),
);

/** What a node must have for this config: ports to check, model files expected. */
export interface NodeNeeds {
  /** Ports sparkform's units will listen on here, with the unit prefix that may hold them. */
  readonly ports: PortNeed[];
  /** The model's files on this node (~/…), when the revision is a commit. */
  readonly modelFiles: string[];
  /** Whether a user unit will run here (worker, server): linger matters. */
  readonly runsUnits: boolean;
}

export function nodeNeeds(config: StackConfigData, node: string): NodeNeeds {
  // Each stage says which ports its units listen on (its descriptor, components/stages.ts).
  const ports = DESCRIPTORS.flatMap((s) => s.ports?.(config, node) ?? []);
  const m = config.model;
  // Only a commit names the directory the model stage writes; a branch is resolved by `up`.
  const modelFiles =
    m && m.nodes.includes(node) && /^[0-9a-f]{40}$/.test(m.revision)
      ? m.files.map((f) => `${modelDir(m.modelsDir, m.repo, m.revision)}/${f}`)
      : [];
  return { ports, modelFiles, runsUnits: ports.length > 0 };
}

/** The node's presented host key (ssh-keyscan, untrusted: for the fix's wording only). */
export function presentedKey(t: SshTarget): string | undefined {
  const r = spawnSync(
    "ssh-keyscan",
    ["-T", String(CONNECT_TIMEOUT_S), "-t", "ed25519", "-p", String(t.port), t.host],
    // The minimal environment, as for ssh itself (child-env.ts): no PULUMI_CONFIG, no secrets.
    { encoding: "utf8", timeout: (CONNECT_TIMEOUT_S + 2) * 1000, env: childEnv() },
  );
  const line = (r.stdout ?? "").split("\n").find((l) => /\sssh-ed25519\s/.test(l));
  const [, type, key] = line?.split(/\s+/) ?? [];
  return type && key ? `${type} ${key}` : undefined;
}

/** `SHA256:…` fingerprint of a `type base64` key, as ssh-keygen -l prints it. */
export function fingerprint(hostKey: string): string {
  const b64 = hostKey.trim().split(/\s+/)[1] ?? "";
  const digest = createHash("sha256").update(Buffer.from(b64, "base64")).digest("base64");
  return `SHA256:${digest.replace(/=+$/, "")}`;
}

/** The finding for a failed first contact, with the fix for its kind. */
export function reachFinding(
  t: SshTarget,
  index: number,
  e: RemoteCommandError,
  elapsedMs: number,
  presented?: string,
): Finding {
  const at = `${t.user}@${t.host}:${t.port}`;
  const took = `${(elapsedMs / 1000).toFixed(1)} s`;
  switch (e.kind) {
    case "host-key":
      return {
        check: "host-key",
        where: t.name,
        status: "fail",
        what:
          `${at} presented a host key that is not the pinned one (pinned ${fingerprint(t.hostKey)}` +
          `${presented ? `, presented ${fingerprint(presented)}` : ""}): nothing was run there`,
        fix:
          "if the node was reinstalled, read its key on the node itself (console: cat /etc/ssh/ssh_host_ed25519_key.pub) " +
          `and pin it: pulumi config set --path 'sparkform:nodes[${index}].hostKey' '<that line>'` +
          `${presented ? ` (the network says ${presented}; trust it only if it matches what the console shows)` : ""}. ` +
          "If the node was not reinstalled, treat it as an attack: do not connect",
      };
    case "auth":
      return {
        check: "reach",
        where: t.name,
        status: "fail",
        what: `${at} refused every key offered`,
        fix: "check the node's user, sparkform:sshKeyPath / privateKey or the agent (ssh-add -l), and ~/.ssh/authorized_keys on the node",
      };
    case "unreachable":
    case "stalled":
    case "timeout":
      return {
        check: "reach",
        where: t.name,
        status: "fail",
        what: `${at} did not answer within ${took} (${e.kind}: ${e.outputTail.split("\n").pop() || "no reply"})`,
        fix:
          `power the node on and check its network and the host/port in sparkform:nodes[${index}]` +
          " (simulated: `sparkform sim start " +
          `${t.name}\`)`,
      };
    default:
      return {
        check: "reach",
        where: t.name,
        status: "fail",
        what: `${at}: ${e.message.split("\n")[0]}`,
        fix: "run the probe by hand: ssh to the node and check that python3 runs",
      };
  }
}

/** The model's file sizes, or a promise of them (resolved at the hub meanwhile). */
export type ModelBytes =
  Record<string, number> | undefined | Promise<Record<string, number> | undefined>;

interface NodeReading {
  readonly name: string;
  readonly findings: Finding[];
  readonly facts?: SparkNodeFacts;
}

async function readNode(
  config: StackConfigData,
  index: number,
  target: SshTarget,
  modelBytes: ModelBytes,
): Promise<NodeReading> {
  const name = target.name;
  const needs = nodeNeeds(config, name);
  const conn = openNode(target);
  const started = Date.now();
  let probe: ProbeResult;
  let t0 = 0;
  let t1 = 0;
  try {
    t0 = Date.now() / 1000;
    const r = await conn.run(
      programCommand(PROBE_PROGRAM, {
        args: [
          ...needs.ports.flatMap((p) => ["--port", String(p.port)]),
          ...needs.modelFiles.flatMap((f) => ["--file", f]),
        ],
        display: "sparkform doctor probe",
      }),
      { step: "doctor probe", connectTimeoutS: CONNECT_TIMEOUT_S, timeoutMs: PROBE_TIMEOUT_MS },
    );
    t1 = Date.now() / 1000;
    probe = parseProbe(r.stdout, name);
  } catch (e) {
    if (!(e instanceof RemoteCommandError)) {
      return {
        name,
        findings: [
          {
            check: "reach",
            where: name,
            status: "fail",
            what: (e as Error).message,
            fix: "the node's python3 printed something unexpected: run the probe by hand",
          },
        ],
      };
    }
    const presented = e.kind === "host-key" ? presentedKey(target) : undefined;
    return { name, findings: [reachFinding(target, index, e, Date.now() - started, presented)] };
  }
  const findings: Finding[] = [
    {
      check: "reach",
      where: name,
      status: "pass",
      what: `ssh ${target.user}@${target.host}:${target.port} with the pinned key (${fingerprint(target.hostKey)}) in ${((t1 - t0) * 1000).toFixed(0)} ms`,
    },
  ];
  findings.push(skewFinding(name, probe.now, t0, t1));
  findings.push(lingerFinding(name, probe, needs));
  findings.push(...portFindings(name, probe, needs));
  let facts: SparkNodeFacts | undefined;
  try {
    const r = await conn.run(
      programCommand("node/facts.sh", {
        args: config.diskPaths,
        display: "native/node/facts.sh",
      }),
      {
        step: "doctor fact sheet",
        connectTimeoutS: CONNECT_TIMEOUT_S,
        timeoutMs: FACTS_TIMEOUT_MS,
      },
    );
    facts = parseFacts(r.stdout, name);
    findings.push(diskFinding(config, name, facts, probe, await modelBytes));
  } catch (e) {
    findings.push({
      check: "facts",
      where: name,
      status: "fail",
      what: `the fact sheet failed: ${(e as Error).message.split("\n")[0]}`,
      fix: "run `npm run pulumi -- refresh` for the full error, or native/node/facts.sh on the node by hand",
    });
  }
  return { name, findings, ...(facts ? { facts } : {}) };
}

export function skewFinding(node: string, nodeNow: number, t0: number, t1: number): Finding {
  // The node read its clock somewhere between t0 and t1 (the control node's).
  const mid = (t0 + t1) / 2;
  const slack = (t1 - t0) / 2;
  const skew = nodeNow - mid;
  const beyond = Math.max(0, Math.abs(skew) - slack);
  const what = `clock ${skew >= 0 ? "+" : ""}${skew.toFixed(2)} s from the control node (±${slack.toFixed(2)} s)`;
  if (beyond <= SKEW_WARN_S) return { check: "clock", where: node, status: "pass", what };
  return {
    check: "clock",
    where: node,
    status: beyond > SKEW_FAIL_S ? "fail" : "warn",
    what,
    fix: "sync the clocks (timedatectl set-ntp true on every node and the control node; check chronyc tracking)",
  };
}

export function lingerFinding(node: string, probe: ProbeResult, needs: NodeNeeds): Finding {
  if (probe.linger) {
    return { check: "linger", where: node, status: "pass", what: `linger on for ${probe.user}` };
  }
  if (!needs.runsUnits) {
    return {
      check: "linger",
      where: node,
      status: "pass",
      what: `linger off for ${probe.user} (no sparkform unit runs here)`,
    };
  }
  return {
    check: "linger",
    where: node,
    status: "warn",
    what: `linger is off for ${probe.user}: the ${needs.ports.map((p) => p.what).join(" and ")} unit would stop at logout; \`up\` turns it on with loginctl enable-linger`,
    fix: `if polkit refuses that without a password, run once on the node: sudo loginctl enable-linger ${probe.user}`,
  };
}

export function portFindings(node: string, probe: ProbeResult, needs: NodeNeeds): Finding[] {
  return needs.ports.map((want) => {
    const seen = probe.ports.find((p) => p.port === want.port)?.listeners ?? [];
    const check = "port";
    if (seen.length === 0) {
      return { check, where: node, status: "pass", what: `${want.what} port ${want.port} is free` };
    }
    const foreign = seen.filter((l) => !(l.unit ?? "").startsWith(want.unitPrefix));
    if (foreign.length === 0) {
      const units = [...new Set(seen.map((l) => l.unit))].join(", ");
      return {
        check,
        where: node,
        status: "pass",
        what: `${want.what} port ${want.port} is held by sparkform's own ${units} (${seen.map((l) => l.address).join(", ")})`,
      };
    }
    const who = foreign
      .map((l) =>
        l.pid === null
          ? `${l.address} (another user's process)`
          : `${l.address} (${l.command ?? "?"} pid ${l.pid}${l.unit ? `, ${l.unit}` : ""})`,
      )
      .join(", ");
    return {
      check,
      where: node,
      status: "fail",
      what: `${want.what} port ${want.port} is taken by ${who}`,
      fix: `stop that process, or give sparkform another port (sparkform:${want.what === "rpc worker" ? "worker" : "server"}.port)`,
    };
  });
}

export function diskFinding(
  config: StackConfigData,
  node: string,
  facts: SparkNodeFacts,
  probe: ProbeResult,
  modelBytes?: Record<string, number>,
): Finding {
  const m = config.model;
  if (!m || !m.nodes.includes(node)) {
    return { check: "disk", where: node, status: "pass", what: "no model configured here" };
  }
  const d = facts.disk.find((x) => x.path === m.modelsDir) ?? facts.disk[0];
  const free = d?.freeBytes ?? null;
  const sizes = modelBytes ?? {};
  const missing = m.files.filter((f) => sizes[f] === undefined);
  if (free === null) {
    return {
      check: "disk",
      where: node,
      status: "warn",
      what: `free space of ${m.modelsDir} unknown (${d?.reason ?? "not measured"})`,
      fix: "check df on the node",
    };
  }
  if (missing.length > 0) {
    return {
      check: "disk",
      where: node,
      status: "skip",
      what: `${bytes(free)} free on ${d?.checkedPath}; the model's size is known after the first \`up\` resolves it`,
    };
  }
  // Files already there in full need no new space.
  const need = m.files.reduce((s, f) => {
    const have = probe.files.find((x) => x.path.endsWith(`/${f}`));
    return s + (have?.exists && have.size === sizes[f] ? 0 : (sizes[f] ?? 0));
  }, 0);
  const total = m.files.reduce((s, f) => s + (sizes[f] ?? 0), 0);
  const what = `model ${bytes(total)} (${bytes(need)} still to fetch), ${bytes(free)} free on ${d?.checkedPath}`;
  if (need <= free) return { check: "disk", where: node, status: "pass", what };
  return {
    check: "disk",
    where: node,
    status: "fail",
    what,
    fix: `free ${bytes(need - free)} on ${d?.checkedPath} or point sparkform:model.modelsDir at a bigger filesystem`,
  };
}

/** Per link and rail both ends have: the fabric stage's port checks on today's fact sheets. */
export function fabricFindings(
  config: StackConfigData,
  facts: ReadonlyMap<string, SparkNodeFacts>,
): Finding[] {
  const cfg = config.fabric;
  if (!cfg) return [];
  const t = fabricThresholds(cfg);
  const out: Finding[] = [];
  const names = config.nodes.map((n) => n.name).filter((n) => cfg.rails[n]);
  for (const l of fabricLinks(cfg.topology, names, (n) => cfg.rails[n])) {
    const { a, b, ra, rb } = l;
    const where = `${a}↔${b} ${railsLabel(l)}`;
    const fa = facts.get(a);
    const fb = facts.get(b);
    if (!fa || !fb) {
      out.push({
        check: "fabric",
        where,
        status: "skip",
        what: `not judged: ${!fa ? a : b} could not be read`,
      });
      continue;
    }
    const end = (node: string, f: SparkNodeFacts, rail: typeof ra) => {
      const fixture = cfg.rdmaFixtures?.[node] ?? cfg.rdmaFixture;
      return portFacts(node, f, fixture ? fixtureRdma(fixture) : liveRdma(f), rail, cfg.gidIndex);
    };
    const failed = portChecks(end(a, fa, ra), end(b, fb, rb), t).filter((c) => !c.ok);
    const addressed = [
      [a, fa, ra],
      [b, fb, rb],
    ] as const;
    const unaddressed = addressed.filter(([, f, r]) => {
      const addrs = f.netdevs.find((n) => n.name === r.iface)?.addresses;
      return addrs !== null && addrs !== undefined && !addrs.includes(r.address);
    });
    if (failed.length === 0 && unaddressed.length === 0) {
      out.push({
        check: "fabric",
        where,
        status: "pass",
        what: "link up, speed, MTU, RoCE GID, PCIe width and addresses as configured (throughput is measured by `up`/`refresh`)",
      });
      continue;
    }
    for (const [node, , r] of unaddressed) {
      out.push({
        check: "fabric",
        where,
        status: "fail",
        what: `${node}'s ${r.iface} does not carry ${r.address}`,
        fix: `add the address on ${node} (nmcli/netplan: ${r.iface} ${r.address}) or correct sparkform:fabric.rails`,
      });
    }
    for (const c of failed) {
      out.push({
        check: `fabric ${c.check}`,
        where,
        status: "fail",
        what: c.message,
        fix: "see the message",
      });
    }
  }
  return out;
}

/** Every node's findings, all nodes at once; the fact sheets for the fabric's checks. */
export async function nodeFindings(
  config: StackConfigData,
  target: (node: string) => SshTarget,
  modelBytes?: ModelBytes,
): Promise<Finding[]> {
  const readings = await Promise.all(
    config.nodes.map((n, i) => readNode(config, i, target(n.name), modelBytes)),
  );
  const facts = new Map<string, SparkNodeFacts>();
  for (const r of readings) if (r.facts) facts.set(r.name, r.facts);
  return [...readings.flatMap((r) => r.findings), ...fabricFindings(config, facts)];
}
