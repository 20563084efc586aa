// Networks: the management bridge on the host, one namespace per node with a veth onto the
// bridge, and the fabric — two rails on two subnets, as on the lab's pair; each rail a veth pair
// straight between two node namespaces, or for N > 2 a bridge (the rail's "switch") inside a
// namespace of its own; or (`sim up --ring`, three nodes) a ring: each pair of nodes its own veth
// on its own /24, each node's fabric0 to the next node and fabric1 to the one before, as NVIDIA's
// three-Spark ring cables them. The host gets no route to the fabric:
// only an `unreachable` route, so that trying fails at once instead of leaking to a gateway.
import * as fs from "node:fs";
import { ipJson, run, runRaw } from "./exec";
import {
  fabricLineMbit,
  fabricMtu,
  fabricRails,
  mgmtIface,
  names,
  railIface,
  routeProto,
} from "./paths";
import type { SimRail, SimState } from "./state";
import { readRegistry } from "./state";

export interface Subnets {
  mgmt: string; // a.b.c.0/24
  /** Rail 0's subnet (= rails[0]). */
  fabric: string;
  /** One /24 per rail. */
  rails: string[];
}

/** `a.b.c.0/24` + host number → `a.b.c.n`. */
export function hostIn(subnet: string, n: number): string {
  const base = subnet.split("/")[0] ?? "";
  return base.replace(/\.\d+$/, `.${n}`);
}

export const controlHost = 1;
export const mgmtHost = (index: number) => 10 + index; // spark-1 → .11
export const fabricHost = (index: number) => index; // spark-2 → .2

function ipToInt(ip: string): number {
  return ip.split(".").reduce((acc, o) => acc * 256 + Number(o), 0);
}

function parseCidr(cidr: string): [number, number] | undefined {
  const [ip, lenStr] = cidr.split("/");
  if (!ip || !/^\d+\.\d+\.\d+\.\d+$/.test(ip)) return undefined;
  const len = lenStr === undefined ? 32 : Number(lenStr);
  const size = 2 ** (32 - len);
  const start = Math.floor(ipToInt(ip) / size) * size;
  return [start, start + size - 1];
}

export function overlaps(a: string, b: string): boolean {
  const x = parseCidr(a);
  const y = parseCidr(b);
  if (!x || !y) return false;
  return x[0] <= y[1] && y[0] <= x[1];
}

/** Candidate /24s from private ranges, in an order that starts at an offset taken from the run id. */
function candidates(runId: string, prefixes: readonly string[]): string[] {
  const out: string[] = [];
  const seed = Number.parseInt(runId.slice(0, 4), 16) % 256;
  for (const prefix of prefixes) {
    for (let i = 0; i < 256; i++) out.push(`${prefix}.${(seed + i) % 256}.0/24`);
  }
  return out;
}

const mgmtPrefixes = ["10.213", "172.29", "10.187"];
const fabricPrefixes = ["10.214", "172.30", "10.188"];

/**
 * Picks free /24s (mgmt, one per rail, or per cable of a ring: `fabricCount`): none overlaps a
 * host route (any table), an address, or another run.
 */
export async function chooseSubnets(runId: string, fabricCount = fabricRails): Promise<Subnets> {
  type Route = { dst?: string };
  type Addr = { addr_info?: Array<{ family?: string; local?: string; prefixlen?: number }> };
  const taken: string[] = [];
  for (const r of await ipJson<Route>(["-4", "route", "show", "table", "all"])) {
    if (r.dst && r.dst !== "default") taken.push(r.dst);
  }
  for (const l of await ipJson<Addr>(["-4", "addr", "show"])) {
    for (const a of l.addr_info ?? []) {
      if (a.local) taken.push(`${a.local}/${a.prefixlen ?? 32}`);
    }
  }
  for (const e of readRegistry())
    taken.push(e.mgmtSubnet, e.fabricSubnet, ...(e.railSubnets ?? []));
  const free = (prefixes: readonly string[]) => {
    const c = candidates(runId, prefixes).find((x) => !taken.some((t) => overlaps(x, t)));
    if (c) taken.push(c);
    return c;
  };
  const mgmt = free(mgmtPrefixes);
  const rails = Array.from({ length: fabricCount }, () => free(fabricPrefixes));
  const [fabric] = rails;
  if (!mgmt || !fabric || rails.some((r) => !r))
    throw new Error("sim: no free private /24 left for the sim's networks");
  return { mgmt, fabric, rails: rails as string[] };
}

function writeSysctl(key: string, value: string): void {
  try {
    fs.writeFileSync(`/proc/sys/${key.replace(/\./g, "/")}`, value);
  } catch {
    /* IPv6 may be off altogether: nothing to silence then */
  }
}

const ipn = (ns: string, ...args: string[]) => run("ip", ["-n", ns, ...args]);

/** Creates the bridge, the namespaces, the mgmt veths and the fabric; records names in `s`. */
export async function createNetwork(s: SimState): Promise<void> {
  const br = s.bridge;
  const prefix = s.mgmtSubnet.split("/")[1];
  await run("ip", ["link", "add", br, "type", "bridge"]);
  writeSysctl(`net.ipv6.conf.${br}.disable_ipv6`, "1");
  await run("ip", ["addr", "add", `${s.controlAddress}/${prefix}`, "dev", br]);
  await run("ip", ["link", "set", br, "up"]);
  for (const subnet of railSubnets(s)) {
    await run("ip", ["route", "add", "unreachable", subnet, "proto", String(routeProto)]);
  }
  for (const n of s.nodes) {
    await run("ip", ["netns", "add", n.netns]);
    await ipn(n.netns, "link", "set", "lo", "up");
    await run("ip", [
      "link",
      "add",
      n.hostVeth,
      "type",
      "veth",
      "peer",
      "name",
      mgmtIface,
      "netns",
      n.netns,
    ]);
    writeSysctl(`net.ipv6.conf.${n.hostVeth}.disable_ipv6`, "1");
    await run("ip", ["link", "set", n.hostVeth, "master", br, "up"]);
    await ipn(
      n.netns,
      "addr",
      "add",
      `${hostIn(s.mgmtSubnet, mgmtHost(n.index))}/24`,
      "dev",
      mgmtIface,
    );
    await ipn(n.netns, "link", "set", mgmtIface, "up");
  }
  s.railNetns = [];
  if (s.ring) {
    await createRing(s);
    return;
  }
  for (const [rail, subnet] of railSubnets(s).entries()) await createRail(s, rail, subnet);
}

/**
 * Rail 0's subnet first: states written before rails had only fabricSubnet. A ring's are its
 * cables' (one per pair of nodes), not its rails': railCount says how many rails a node has.
 */
export function railSubnets(s: Pick<SimState, "fabricSubnet" | "railSubnets">): string[] {
  return s.railSubnets?.length ? s.railSubnets : [s.fabricSubnet];
}

/** How many rails each node has: a ring's two, else one per subnet. */
export function railCount(s: Pick<SimState, "fabricSubnet" | "railSubnets" | "ring">): number {
  return s.ring ? fabricRails : railSubnets(s).length;
}

/** One cable of a ring: its subnet and its two ends (node index, rail). */
export interface RingCable {
  subnet: string;
  ends: [{ index: number; rail: number }, { index: number; rail: number }];
}

/**
 * A ring's cables over `subnets` (one each): cable k joins node k+1's rail 0 to the next node's
 * rail 1, so each node's fabric0 goes to its successor and fabric1 to its predecessor; the rail
 * numbers of a cable's ends differ, as on the real ring.
 */
export function ringCables(count: number, subnets: readonly string[]): RingCable[] {
  if (subnets.length !== count)
    throw new Error(`sim: a ring of ${count} nodes needs ${count} subnets (got ${subnets.length})`);
  return subnets.map((subnet, k) => ({
    subnet,
    ends: [
      { index: k + 1, rail: 0 },
      { index: ((k + 1) % count) + 1, rail: 1 },
    ],
  }));
}

/** Node `index`'s end of `rail` in a ring: its cable's subnet, its address there, the peer. */
export function ringEnd(
  cables: readonly RingCable[],
  index: number,
  rail: number,
): { subnet: string; address: string; peer: number } | undefined {
  for (const c of cables) {
    const mine = c.ends.findIndex((e) => e.index === index && e.rail === rail);
    const other = c.ends[1 - mine];
    if (mine >= 0 && other) {
      const address = `${hostIn(c.subnet, fabricHost(index))}/24`;
      return { subnet: c.subnet, address, peer: other.index };
    }
  }
  return undefined;
}

/** What the ring's layout is read from: the flag, the node count, the subnets. */
type Layout = Pick<SimState, "ring" | "fabricSubnet" | "railSubnets"> & {
  nodes: readonly unknown[];
};

/** The ring of a state made with `--ring` (undefined for a cable pair or a switch). */
export function ringOf(s: Layout) {
  return s.ring ? ringCables(s.nodes.length, railSubnets(s)) : undefined;
}

/**
 * A node's rails as cluster.json records them: per rail its interface, address and subnet (a
 * ring's: its end of the cable there; otherwise the rail's subnet).
 */
export function nodeRails(s: Layout, index: number): SimRail[] {
  const cables = ringOf(s);
  if (!cables) {
    return railSubnets(s).map((subnet, rail) => ({
      rail,
      iface: railIface(rail),
      address: `${hostIn(subnet, fabricHost(index))}/24`,
      subnet,
    }));
  }
  return Array.from({ length: fabricRails }, (_, rail) => ringEnd(cables, index, rail)).flatMap(
    (e, rail) =>
      e ? [{ rail, iface: railIface(rail), address: e.address, subnet: e.subnet }] : [],
  );
}

/** A ring: one veth per cable between its two nodes' namespaces, each end its node's rail. */
async function createRing(s: SimState): Promise<void> {
  const cables = ringOf(s) ?? [];
  const ns = (index: number) => s.nodes.find((n) => n.index === index)?.netns as string;
  for (const { ends } of cables) {
    const [a, b] = ends;
    await run("ip", veth(railIface(a.rail), ns(a.index), railIface(b.rail), ns(b.index)));
  }
  for (const n of s.nodes) {
    for (let rail = 0; rail < fabricRails; rail++) {
      const end = ringEnd(cables, n.index, rail);
      if (!end) continue;
      await ipn(n.netns, "addr", "add", end.address, "dev", railIface(rail));
      await shapeRail(n.netns, rail, fabricLineMbit);
      await ipn(n.netns, "link", "set", railIface(rail), "up");
    }
  }
}

/** `ip` argv for a veth pair at the fabric's MTU: `ifA` in namespace `nsA`, `ifB` in `nsB`. */
function veth(ifA: string, nsA: string, ifB: string, nsB: string): string[] {
  const mtu = ["mtu", String(fabricMtu)];
  const ends = [ifA, "netns", nsA, ...mtu, "type", "veth", "peer", "name", ifB, "netns", nsB];
  return ["link", "add", ...ends, ...mtu];
}

async function createRail(s: SimState, rail: number, subnet: string): Promise<void> {
  const iface = railIface(rail);
  if (s.nodes.length === 2) {
    const [a, b] = s.nodes as [SimState["nodes"][0], SimState["nodes"][0]];
    await run("ip", veth(iface, a.netns, iface, b.netns));
  } else if (s.nodes.length > 2) {
    const sw = names.railNetns(s.runId, rail);
    if (rail === 0) s.fabricNetns = sw;
    s.railNetns = [...(s.railNetns ?? []), sw];
    await run("ip", ["netns", "add", sw]);
    await ipn(sw, "link", "set", "lo", "up");
    await ipn(sw, "link", "add", "switch0", "mtu", String(fabricMtu), "type", "bridge");
    await ipn(sw, "link", "set", "switch0", "up");
    for (const n of s.nodes) {
      const port = switchPort(n.index);
      await run("ip", veth(port, sw, iface, n.netns));
      await ipn(sw, "link", "set", port, "master", "switch0", "up");
    }
  }
  for (const n of s.nodes) {
    if (s.nodes.length < 2) break;
    await ipn(n.netns, "addr", "add", `${hostIn(subnet, fabricHost(n.index))}/24`, "dev", iface);
    await shapeRail(n.netns, rail, fabricLineMbit);
    await ipn(n.netns, "link", "set", iface, "up");
  }
}

/**
 * The qdisc that gives a node's end of a rail its rate: a token bucket (tbf) at `mbit`, its
 * bucket large enough for the rate at the kernel's timer (1 MB at 1 Gbit/s; a bucket under
 * rate/HZ caps the rate below the line), and at least 256 kB for slow rates.
 */
export function railQdisc(mbit: number): string[] {
  if (!Number.isFinite(mbit) || mbit <= 0)
    throw new Error(`sim: a rail's rate must be > 0 Mbit/s (got ${mbit})`);
  const burstKb = Math.max(256, Math.ceil(mbit));
  return ["root", "tbf", "rate", `${mbit}mbit`, "burst", `${burstKb}kb`, "latency", "50ms"];
}

/**
 * Shapes a node's end of `rail` (its egress; every pair's traffic leaves through one shaped end,
 * so the rail's rate is the slower end's). `tc qdisc replace`: the same call sets the line
 * rate, slows a rail for a test, and restores it.
 */
export async function shapeRail(netns: string, rail: number, mbit: number): Promise<void> {
  await run("ip", [
    "netns",
    "exec",
    netns,
    "tc",
    "qdisc",
    "replace",
    "dev",
    railIface(rail),
    ...railQdisc(mbit),
  ]);
}

/** Every node's end of every rail at the line rate (a cluster made before rails were shaped gets it too). */
export async function shapeRails(s: SimState): Promise<void> {
  if (s.nodes.length < 2) return;
  for (const n of s.nodes) {
    for (let rail = 0; rail < railCount(s); rail++) await shapeRail(n.netns, rail, fabricLineMbit);
  }
}

/** The rate a node's end of a rail is shaped to, Mbit/s (null: not shaped). */
export async function railRateMbit(netns: string, rail: number): Promise<number | null> {
  const r = await runRaw("ip", [
    "netns",
    "exec",
    netns,
    "tc",
    "-j",
    "qdisc",
    "show",
    "dev",
    railIface(rail),
    "root",
  ]);
  if (r.exitCode !== 0 || !r.stdout.trim()) return null;
  const [q] = JSON.parse(r.stdout) as { kind?: string; options?: { rate?: number } }[];
  if (q?.kind !== "tbf") return null;
  const rate = q.options?.rate; // bytes per second
  return typeof rate === "number" ? (rate * 8) / 1e6 : null;
}

export const switchPort = (index: number) => `port${index}`;

/** The rails a fault acts on: `rail` (checked against the cluster's), or every rail. */
export function railsSelected(
  s: Pick<SimState, "fabricSubnet" | "railSubnets" | "ring">,
  rail: number | undefined,
): number[] {
  const count = railCount(s);
  if (rail !== undefined && (!Number.isInteger(rail) || rail < 0 || rail >= count)) {
    throw new Error(`sim: --rail must be 0..${count - 1} (got ${String(rail)})`);
  }
  return rail === undefined ? [...Array(count).keys()] : [rail];
}

/** The cutLinks key of a link and rail: "a|b" for rail 0 (as before rails), "a|b@r" else. */
export function cutKey(a: string, b: string, rail: number): string {
  const k = [a, b].sort().join("|");
  return rail === 0 ? k : `${k}@${rail}`;
}

/**
 * Cuts or restores the fabric between two nodes, on one rail or (rail undefined) on all.
 * Point-to-point: both ends go down/up. With a switch, one side must be `switch`: that node's
 * port on the rail's switch goes down/up (the node sees its carrier go).
 */
export async function setFabricLink(
  s: SimState,
  a: string,
  b: string,
  state: "up" | "down",
  rail?: number,
): Promise<void> {
  const node = (name: string) => {
    const n = s.nodes.find((x) => x.name === name);
    if (!n)
      throw new Error(
        `sim: no node ${JSON.stringify(name)} (nodes: ${s.nodes.map((x) => x.name).join(", ")})`,
      );
    return n;
  };
  const rails = railsSelected(s, rail);
  const cables = ringOf(s);
  if (cables) {
    // A ring's cable is the pair's one link: both its ends go, whatever their rail numbers.
    const x = node(a);
    const y = node(b);
    const cable = cables.find(
      (c) => c.ends.some((e) => e.index === x.index) && c.ends.some((e) => e.index === y.index),
    );
    if (!cable || a === b)
      throw new Error(`sim: no cable joins ${a} and ${b} in the ring; name two different nodes`);
    for (const e of cable.ends) {
      const n = e.index === x.index ? x : y;
      await ipn(n.netns, "link", "set", railIface(e.rail), state);
    }
    const key = cutKey(a, b, 0);
    s.cutLinks = s.cutLinks.filter((k) => k !== key);
    if (state === "down") s.cutLinks.push(key);
    return;
  }
  if (s.fabricNetns) {
    const ends = [a, b].filter((x) => x !== "switch");
    if (ends.length !== 1 || (a !== "switch" && b !== "switch")) {
      throw new Error(
        `sim: with ${s.nodes.length} nodes the fabric is a switch; cut one node's port with \`sim link <node> switch ${state}\``,
      );
    }
    const n = node(ends[0] as string);
    for (const r of rails) {
      const sw = s.railNetns?.[r] ?? names.railNetns(s.runId, r);
      await ipn(sw, "link", "set", switchPort(n.index), state);
    }
  } else {
    if (a === b) throw new Error("sim: a link needs two different nodes");
    const x = node(a);
    const y = node(b);
    for (const r of rails) {
      for (const n of [x, y]) await ipn(n.netns, "link", "set", railIface(r), state);
    }
  }
  for (const r of rails) {
    const key = cutKey(a, b, r);
    s.cutLinks = s.cutLinks.filter((k) => k !== key);
    if (state === "down") s.cutLinks.push(key);
  }
}

/** A fabric interface's state inside a node's namespace: "UP", "DOWN", "LOWERLAYERDOWN", … */
export async function fabricOperState(netns: string, iface = railIface(0)): Promise<string> {
  const r = await runRaw("ip", ["-n", netns, "-j", "link", "show", iface]);
  if (r.exitCode !== 0) return "absent";
  const [l] = JSON.parse(r.stdout) as Array<{ operstate?: string; mtu?: number }>;
  return l?.operstate ?? "unknown";
}

export async function listNetns(): Promise<string[]> {
  const r = await runRaw("ip", ["-j", "netns", "list"]);
  if (r.exitCode !== 0 || !r.stdout.trim()) return [];
  return (JSON.parse(r.stdout) as Array<{ name: string }>).map((x) => x.name);
}

export async function listLinks(): Promise<string[]> {
  return (await ipJson<{ ifname: string }>(["link", "show"])).map((l) => l.ifname);
}

export interface RouteEntry {
  dst?: string;
  type?: string;
  protocol?: string;
}

export async function listSimRoutes(): Promise<RouteEntry[]> {
  const r = await runRaw("ip", [
    "-j",
    "-4",
    "route",
    "show",
    "table",
    "all",
    "proto",
    String(routeProto),
  ]);
  if (r.exitCode !== 0 || !r.stdout.trim()) return [];
  return JSON.parse(r.stdout) as RouteEntry[];
}

/** Removes what createNetwork made (best effort, every step tried); returns what it removed. */
export async function destroyNetwork(p: {
  bridge?: string;
  netns: string[];
  hostVeths: string[];
  fabricSubnet?: string;
  /** Every rail's subnet (fabricSubnet included or not: each route is removed once). */
  railSubnets?: string[];
}): Promise<string[]> {
  const removed: string[] = [];
  const existingNs = new Set(await listNetns());
  for (const ns of p.netns) {
    if (!existingNs.has(ns)) continue;
    const r = await runRaw("ip", ["netns", "del", ns]);
    if (r.exitCode === 0) removed.push(`netns ${ns}`);
  }
  const links = new Set(await listLinks());
  for (const l of [...p.hostVeths, ...(p.bridge ? [p.bridge] : [])]) {
    if (!links.has(l)) continue;
    const r = await runRaw("ip", ["link", "del", l]);
    if (r.exitCode === 0) removed.push(`link ${l}`);
  }
  for (const subnet of new Set([
    ...(p.fabricSubnet ? [p.fabricSubnet] : []),
    ...(p.railSubnets ?? []),
  ])) {
    const r = await runRaw("ip", [
      "route",
      "del",
      "unreachable",
      subnet,
      "proto",
      String(routeProto),
    ]);
    if (r.exitCode === 0) removed.push(`route unreachable ${subnet}`);
  }
  return removed;
}
