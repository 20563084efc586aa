// The fabric report, pure: markdown and a topology picture (SVG) from the FabricLink outputs a
// stack holds. Every node, port and rail; on every link the measured RTT, throughput and class;
// facts from fixtures labelled as such in both. cli/commands/report.ts writes them (and a PNG).
import {
  railsLabel,
  subnetOf,
  type BandwidthClass,
  type CheckResult,
  type FabricThresholds,
} from "./checks";
import { renderEnvBlock, RDMA_CONTAINER_FLAGS } from "./nccl";
import type { FactSource, PortFacts } from "./ports";

/** What the report reads of one FabricLink's outputs. */
export interface ReportLink {
  readonly link: string;
  readonly rail: number;
  readonly topology: "point-to-point" | "switch" | "ring";
  readonly gidIndex: number;
  readonly ports: { readonly a: PortFacts; readonly b: PortFacts };
  readonly source: FactSource;
  readonly rttP50Us: number | null;
  readonly rttP99Us: number | null;
  readonly throughputGbps: number | null;
  readonly classReferenceGbps: number | null;
  readonly class: BandwidthClass;
  readonly checks: readonly CheckResult[];
  readonly healthy: boolean;
  readonly rdma: { readonly measured: boolean; readonly reason: string };
  readonly error: string | null;
  readonly mgmtIface?: { readonly a: string | null; readonly b: string | null };
  /** The thresholds the stack configured (sparkform:fabric.thresholds), as recorded. */
  readonly thresholds?: Partial<FabricThresholds>;
}

export const ICMP_NOTE =
  "Latency is TCP request/response between the rail addresses, never ICMP: on a Spark, ping over the 200G link reads ~1.2 ms, which is cpuidle exit latency, not the wire (TCP p50 is ~19 µs, RDMA 1.39 µs).";

const fmt = (v: number | null, unit: string, digits = 1) =>
  v === null ? "—" : `${v.toFixed(digits)} ${unit}`;

/** A link's rails: "rail 0", or a ring cable whose ends carry different numbers, "rail 0↔1". */
const railsOf = (l: ReportLink) => railsLabel(l.ports.a.rail, l.ports.b.rail);

const TOPOLOGY_TEXT = {
  "point-to-point": "point-to-point",
  switch: "a switch per rail",
  ring: "a ring (a cable per pair of nodes, each its own subnet)",
} as const;

const sortLinks = (ls: readonly ReportLink[]) =>
  [...ls].sort((x, y) => x.link.localeCompare(y.link) || x.rail - y.rail);

/** Nodes in first-seen order, with each node's ports by rail. */
function nodesOf(ls: readonly ReportLink[]): Map<string, Map<number, PortFacts>> {
  const nodes = new Map<string, Map<number, PortFacts>>();
  for (const l of sortLinks(ls)) {
    for (const p of [l.ports.a, l.ports.b]) {
      if (!nodes.has(p.node)) nodes.set(p.node, new Map());
      const m = nodes.get(p.node) as Map<number, PortFacts>;
      if (!m.has(p.rail)) m.set(p.rail, p);
    }
  }
  return new Map([...nodes].sort(([a], [b]) => a.localeCompare(b, "en", { numeric: true })));
}

function fixtureOrigins(ls: readonly ReportLink[]): string[] {
  const s = new Set<string>();
  for (const l of ls)
    for (const p of [l.ports.a, l.ports.b]) if (p.source === "fixture") s.add(p.origin);
  return [...s].sort();
}

// ---- markdown ----------------------------------------------------------------------------

export function renderMarkdown(
  links: readonly ReportLink[],
  opts: { stack: string; picture?: string } = { stack: "" },
): string {
  const ls = sortLinks(links);
  const fx = fixtureOrigins(ls);
  const nodes = nodesOf(ls);
  const topology = ls[0]?.topology ?? "point-to-point";
  const out: string[] = [`# Fabric report${opts.stack ? `: stack \`${opts.stack}\`` : ""}`, ""];
  if (ls.length === 0) {
    out.push(
      "No FabricLink resources in this stack: run `pulumi up` with `sparkform:fabric` set.",
      "",
    );
    return out.join("\n");
  }
  const bad = ls.filter((l) => !l.healthy);
  out.push(
    `${nodes.size} nodes, ${TOPOLOGY_TEXT[topology]}, ` +
      `${new Set(ls.map((l) => l.rail)).size} rails, ${ls.length} links measured: ` +
      (bad.length ? `**${bad.length} failing**.` : "all healthy."),
    "",
  );
  if (fx.length) {
    out.push(
      `> **Fixture-sourced RDMA facts** (${fx.join(", ")}): these nodes have no RDMA devices, so HCA, GID, active_mtu, link speed and PCIe facts come from sysfs fixture trees made from the reference figures. RTT and throughput are measured for real over the nodes' rail interfaces.`,
      "",
    );
  }
  if (opts.picture) out.push(`![fabric topology](${opts.picture})`, "");
  out.push(ICMP_NOTE, "");
  out.push(
    "## Links",
    "",
    "| link | rail | ports | TCP RTT p50 / p99 | throughput | reference | class |",
    "|---|---|---|---|---|---|---|",
  );
  for (const l of ls) {
    const port = (p: PortFacts) =>
      `${p.node}:${p.iface}${p.rdmaDevice ? ` (${p.rdmaDevice}${p.source === "fixture" ? ", fixture" : ""})` : ""}`;
    out.push(
      `| ${l.link} | ${railsOf(l).replace(/^rail /, "")} | ${port(l.ports.a)} ↔ ${port(l.ports.b)} | ${fmt(l.rttP50Us, "µs")} / ${fmt(l.rttP99Us, "µs")} | ${fmt(l.throughputGbps, "Gbit/s", 2)} | ${fmt(l.classReferenceGbps, "Gbit/s", 2)} | ${l.class}${l.healthy ? "" : " ✗"} |`,
    );
  }
  out.push("");
  const failing = ls.flatMap((l) => l.checks.filter((c) => !c.ok).map((c) => ({ l, c })));
  out.push("## Checks", "");
  if (failing.length === 0) out.push("Every check passes on every link and rail.", "");
  else {
    for (const { l, c } of failing)
      out.push(`- **${l.link} ${railsOf(l)}, ${c.check}**: ${c.message}`);
    out.push("");
  }
  out.push(
    "## Ports",
    "",
    "| node | rail | interface | address | RDMA device | netdev | state | speed | MTU (if/netdev/RDMA) | GID | PCIe | source |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|",
  );
  for (const [, rails] of nodes) {
    for (const [, p] of [...rails].sort(([a], [b]) => a - b)) {
      out.push(
        `| ${p.node} | ${p.rail} | ${p.iface} (${p.ifaceOperstate ?? "absent"}) | ${p.address} | ${p.rdmaDevice ?? "—"} | ${p.netdev} | ${p.state ?? "—"}/${p.physState ?? "—"} | ${p.speedMbps === null ? "—" : `${p.speedMbps / 1000} Gbit/s`} | ${p.ifaceMtu ?? "—"}/${p.netdevMtu ?? "—"}/${p.activeMtu ?? "—"} | ${p.gidIndex}: ${p.gidType ?? "—"} | ${p.pcie.width === null ? "—" : `x${p.pcie.width}`} ${p.pcie.speed ?? ""} | ${p.source === "fixture" ? `fixture ${p.origin}` : "sysfs"} |`,
      );
    }
  }
  out.push("");
  const rdma = [...new Set(ls.map((l) => l.rdma.reason))];
  out.push("RDMA latency and bandwidth (perftest): not measured — " + rdma.join("; ") + ".", "");
  out.push("## NCCL (vLLM, SGLang, TRT-LLM)", "");
  for (const [name, rails] of nodes) {
    const hcas = [...rails]
      .sort(([a], [b]) => a - b)
      .map(([, p]) => p.rdmaDevice)
      .filter((d): d is string => d !== null);
    const mgmt =
      ls
        .map((l) =>
          l.ports.a.node === name
            ? l.mgmtIface?.a
            : l.ports.b.node === name
              ? l.mgmtIface?.b
              : null,
        )
        .find((m) => m) ?? "<management interface>";
    if (hcas.length === 0) {
      out.push(`${name}: no RDMA device on any rail: NCCL would use NET/Socket.`, "");
      continue;
    }
    out.push(
      `${name}${rails.size && [...rails.values()].some((p) => p.source === "fixture") ? " (HCAs from fixture)" : ""}:`,
      "",
      "```sh",
      renderEnvBlock({ hcas, socketIfname: mgmt, gidIndex: ls[0]?.gidIndex ?? 3 }),
      `# containers: docker run ${RDMA_CONTAINER_FLAGS.join(" ")} …`,
      "```",
      "",
    );
  }
  out.push(
    "Verify a run with `sparkform check nccl-log <log>` (NCCL_DEBUG=INFO): `via NET/IB` > 0 and no `via NET/Socket`.",
    "",
  );
  return out.join("\n");
}

// ---- picture -----------------------------------------------------------------------------

const nodeFill = 'fill="#eceff1" stroke="#455a64" stroke-width="2"';

const COLOR: Record<BandwidthClass, string> = {
  healthy: "#2e7d32",
  degraded: "#ef6c00",
  "stale-initialization": "#c62828",
  down: "#9e9e9e",
};

/** A link whose class is fine but another check fails (GID, MTU, speed, …). */
const CHECK_FAILED = "#6a1b9a";

/** A link's colour: its class, or CHECK_FAILED when the class is healthy but a check fails. */
const colorOf = (l: ReportLink) =>
  l.class === "healthy" && !l.healthy ? CHECK_FAILED : COLOR[l.class];

const failedChecks = (l: ReportLink) => {
  const f = l.checks.filter((c) => !c.ok && c.check !== "bandwidth").map((c) => c.check);
  return f.length ? ` · ✗ ${[...new Set(f)].join(", ")}` : "";
};

const esc = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

const FONT = 'font-family="DejaVu Sans, Helvetica, Arial, sans-serif"';

function text(
  x: number,
  y: number,
  s: string,
  o: { size?: number; anchor?: string; weight?: string; fill?: string } = {},
) {
  return `<text x="${x}" y="${y}" ${FONT} font-size="${o.size ?? 13}" text-anchor="${o.anchor ?? "start"}"${o.weight ? ` font-weight="${o.weight}"` : ""} fill="${o.fill ?? "#212121"}">${esc(s)}</text>`;
}

const metrics = (l: ReportLink) =>
  (l.error !== null && l.throughputGbps === null
    ? `${l.class}: ${l.error}`
    : `p50 ${fmt(l.rttP50Us, "µs")} · p99 ${fmt(l.rttP99Us, "µs")} · ${fmt(l.throughputGbps, "Gbit/s", 2)} · ${l.class}`) +
  failedChecks(l);

const portLabel = (p: PortFacts) =>
  `${p.iface}${p.rdmaDevice ? ` · ${p.rdmaDevice}${p.source === "fixture" ? " (fixture)" : ""}` : ""}`;

/** The topology picture: nodes and their ports; per rail a cable or a switch; per link its numbers. */
export function renderSvg(links: readonly ReportLink[], title = "sparkform fabric"): string {
  const ls = sortLinks(links);
  const nodes = nodesOf(ls);
  const names = [...nodes.keys()];
  const rails = [...new Set(ls.map((l) => l.rail))].sort((a, b) => a - b);
  const fx = fixtureOrigins(ls);
  const topology = ls[0]?.topology ?? "point-to-point";
  const switched = topology === "switch" || names.length > 2;
  const W = 1000;
  const parts: string[] = [];
  const boxW = 250;
  const railGap = 90;
  let y0 = 80;
  parts.push(text(24, 34, title, { size: 20, weight: "bold" }));
  parts.push(
    text(
      24,
      58,
      fx.length
        ? `RDMA facts from fixture ${fx.join(", ")} (no HCA on these nodes); RTT and throughput measured over TCP, never ICMP`
        : "RDMA facts from each node's sysfs; RTT and throughput measured over TCP, never ICMP",
      { size: 12, fill: fx.length ? "#6a1b9a" : "#424242" },
    ),
  );
  const nodeBox = (x: number, y: number, h: number, name: string) =>
    `<rect x="${x}" y="${y}" width="${boxW}" height="${h}" rx="10" ${nodeFill}/>` +
    text(x + 12, y + 24, name, { size: 16, weight: "bold" });
  if (topology === "ring" && names.length === 3) {
    y0 = ringPicture(ls, nodes, parts, y0, W);
  } else if (!switched && names.length === 2) {
    const [left, right] = names as [string, string];
    const h = 50 + rails.length * railGap;
    const xl = 24;
    const xr = W - 24 - boxW;
    parts.push(nodeBox(xl, y0, h, left), nodeBox(xr, y0, h, right));
    rails.forEach((r, i) => {
      const y = y0 + 70 + i * railGap;
      const l = ls.find((x) => x.rail === r);
      const pl = nodes.get(left)?.get(r);
      const pr = nodes.get(right)?.get(r);
      const color = l ? colorOf(l) : "#9e9e9e";
      parts.push(
        `<line x1="${xl + boxW}" y1="${y}" x2="${xr}" y2="${y}" stroke="${color}" stroke-width="5"${l?.class === "down" ? ' stroke-dasharray="10 8"' : ""}/>`,
        `<circle cx="${xl + boxW}" cy="${y}" r="6" fill="${color}"/>`,
        `<circle cx="${xr}" cy="${y}" r="6" fill="${color}"/>`,
      );
      if (pl)
        parts.push(
          text(xl + 12, y - 6, `rail ${r}: ${portLabel(pl)}`, { size: 12 }),
          text(xl + 12, y + 12, pl.address, { size: 11, fill: "#546e7a" }),
        );
      if (pr)
        parts.push(
          text(xr + 12, y - 6, `rail ${r}: ${portLabel(pr)}`, { size: 12 }),
          text(xr + 12, y + 12, pr.address, { size: 11, fill: "#546e7a" }),
        );
      if (l) {
        parts.push(
          text(
            W / 2,
            y - 12,
            `rail ${r} · ${l.ports.a.speedMbps === null ? "?" : l.ports.a.speedMbps / 1000}G · MTU ${l.ports.a.ifaceMtu ?? "?"}`,
            { size: 12, anchor: "middle" },
          ),
          text(W / 2, y + 22, metrics(l), {
            size: 12,
            anchor: "middle",
            fill: color,
            weight: "bold",
          }),
        );
      }
    });
    y0 += h + 30;
  } else {
    // Nodes in a column on the left, one switch per rail on the right, a cable per node and rail.
    const nodeH = 40 + rails.length * 44;
    const swX = W - 24 - 200;
    names.forEach((name, i) => {
      const y = y0 + i * (nodeH + 20);
      parts.push(nodeBox(24, y, nodeH, name));
      rails.forEach((r, j) => {
        const p = nodes.get(name)?.get(r);
        const py = y + 48 + j * 44;
        const mine = ls.filter(
          (l) => l.rail === r && (l.ports.a.node === name || l.ports.b.node === name),
        );
        const worst =
          mine.find((l) => l.class === "down") ?? mine.find((l) => !l.healthy) ?? mine[0];
        const color = worst ? colorOf(worst) : "#9e9e9e";
        const swY = y0 + 30 + (j * (names.length * (nodeH + 20))) / rails.length;
        parts.push(
          `<line x1="${24 + boxW}" y1="${py}" x2="${swX}" y2="${swY}" stroke="${color}" stroke-width="3"${worst?.class === "down" ? ' stroke-dasharray="8 6"' : ""}/>`,
          `<circle cx="${24 + boxW}" cy="${py}" r="5" fill="${color}"/>`,
        );
        if (p)
          parts.push(
            text(36, py - 4, `rail ${r}: ${portLabel(p)}`, { size: 12 }),
            text(36, py + 12, p.address, { size: 11, fill: "#546e7a" }),
          );
      });
    });
    rails.forEach((r, j) => {
      const swY = y0 + 30 + (j * (names.length * (nodeH + 20))) / rails.length;
      parts.push(
        `<rect x="${swX}" y="${swY - 24}" width="200" height="48" rx="8" fill="#e3f2fd" stroke="#1565c0" stroke-width="2"/>`,
        text(swX + 100, swY + 5, `rail ${r} switch`, {
          size: 14,
          anchor: "middle",
          weight: "bold",
        }),
      );
    });
    y0 += names.length * (nodeH + 20) + 20;
    parts.push(text(24, y0, "Every pair, measured:", { size: 14, weight: "bold" }));
    y0 += 8;
    for (const l of ls) {
      y0 += 20;
      parts.push(
        text(36, y0, `${l.link} rail ${l.rail}: ${metrics(l)}`, { size: 12, fill: colorOf(l) }),
      );
    }
    y0 += 30;
  }
  // Legend.
  let lx = 24;
  const legend: [string, string][] = [
    ...(Object.keys(COLOR) as BandwidthClass[]).map((c): [string, string] => [c, COLOR[c]]),
    ["check failed", CHECK_FAILED],
  ];
  for (const [label, color] of legend) {
    parts.push(
      `<rect x="${lx}" y="${y0 - 10}" width="14" height="14" fill="${color}"/>`,
      text(lx + 20, y0 + 2, label, { size: 12 }),
    );
    lx += 44 + label.length * 7;
  }
  const H = y0 + 24;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    ...parts,
    "</svg>",
    "",
  ].join("\n");
}

/**
 * A ring: the three nodes as a triangle, each edge a cable labelled with its subnet and the two
 * ports it joins and coloured by its class (dashed when down), then every cable's numbers.
 * Returns the y below it.
 */
function ringPicture(
  ls: readonly ReportLink[],
  nodes: Map<string, Map<number, PortFacts>>,
  parts: string[],
  top: number,
  W: number,
): number {
  const boxW = 300;
  const boxH = 120;
  const names = [...nodes.keys()];
  const at = new Map(
    names.map((n, i) => {
      const x = i === 0 ? (W - boxW) / 2 : i === 1 ? 24 : W - 24 - boxW;
      const y = i === 0 ? top + 10 : top + 330;
      return [n, { x, y, cx: x + boxW / 2, cy: y + boxH / 2 }];
    }),
  );
  // Edges first, so the boxes cover their ends.
  for (const l of ls) {
    const a = at.get(l.ports.a.node);
    const b = at.get(l.ports.b.node);
    if (!a || !b) continue;
    const color = colorOf(l);
    parts.push(
      `<line x1="${a.cx}" y1="${a.cy}" x2="${b.cx}" y2="${b.cy}" stroke="${color}" stroke-width="5"${l.class === "down" ? ' stroke-dasharray="10 8"' : ""}/>`,
    );
  }
  for (const l of ls) {
    const a = at.get(l.ports.a.node);
    const b = at.get(l.ports.b.node);
    if (!a || !b) continue;
    const color = colorOf(l);
    const mx = (a.cx + b.cx) / 2;
    const my = (a.cy + b.cy) / 2;
    // The bottom edge is labelled below it; a side edge outside the triangle, above its middle
    // (where the line leans away from the text).
    const flat = Math.abs(a.cy - b.cy) < 1;
    const anchor = flat ? "middle" : mx < W / 2 ? "end" : "start";
    const x = flat ? mx : mx < W / 2 ? mx - 14 : mx + 14;
    const y = flat ? my + boxH / 2 + 4 : my - 44;
    const subnet = subnetOf(l.ports.a.address) ?? l.ports.a.address;
    const gbps = fmt(l.throughputGbps, "Gbit/s", 2);
    parts.push(
      text(x, y, `${subnet} · ${railsOf(l)}`, { size: 13, anchor, weight: "bold" }),
      text(
        x,
        y + 16,
        `${l.ports.a.node}:${l.ports.a.iface} ↔ ${l.ports.b.node}:${l.ports.b.iface}`,
        {
          size: 11,
          anchor,
          fill: "#546e7a",
        },
      ),
      text(x, y + 32, `${gbps} · ${l.class}`, { size: 12, anchor, fill: color, weight: "bold" }),
    );
  }
  for (const [name, { x, y }] of at) {
    parts.push(
      `<rect x="${x}" y="${y}" width="${boxW}" height="${boxH}" rx="10" ${nodeFill}/>`,
      text(x + 12, y + 24, name, { size: 16, weight: "bold" }),
    );
    [...(nodes.get(name) ?? [])]
      .sort(([r], [q]) => r - q)
      .forEach(([r, p], j) => {
        const py = y + 50 + j * 36;
        parts.push(
          text(x + 12, py, `rail ${r}: ${portLabel(p)}`, { size: 12 }),
          text(x + 12, py + 15, p.address, { size: 11, fill: "#546e7a" }),
        );
      });
  }
  let y0 = top + 330 + boxH + 90;
  parts.push(text(24, y0, "Every cable, measured:", { size: 14, weight: "bold" }));
  y0 += 8;
  for (const l of ls) {
    y0 += 20;
    parts.push(
      text(36, y0, `${l.link} ${railsOf(l)}: ${metrics(l)}`, { size: 12, fill: colorOf(l) }),
    );
  }
  return y0 + 30;
}
