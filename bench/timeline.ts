// The engine's event stream of one `pulumi up --event-log FILE`, stamped as it is written: the
// events carry only whole-second timestamps, so the file is read every 100 ms and each new line
// gets the wall-clock time it appeared. From that: each resource's span (its step's start to its
// outputs), and the critical path through the state's dependencies.
import { closeSync, existsSync, fstatSync, openSync, readSync } from "node:fs";

interface Metadata {
  op: string;
  urn: string;
  type: string;
}

export interface EngineEvent {
  timestamp?: number;
  resourcePreEvent?: { metadata: Metadata; planning?: boolean };
  resOutputsEvent?: { metadata: Metadata; planning?: boolean };
  resOpFailedEvent?: { metadata: Metadata };
  diagnosticEvent?: { message: string; ephemeral?: boolean; severity?: string };
}

export interface Stamped {
  /** Milliseconds since the command started. */
  ms: number;
  event: EngineEvent;
}

/**
 * Reads `file` every 100 ms while a command runs; `stop()` reads the rest and returns all. `up`
 * writes the preview's events, then truncates the file for the update's (their `sequence` starts
 * again at 0): a file shorter than what was read, or a line out of sequence, starts over, and
 * what was kept is then the update's events only.
 */
export function watchEvents(file: string, t0: number): { stop(): Stamped[] } {
  let out: Stamped[] = [];
  let offset = 0;
  let partial = "";
  const restart = () => {
    out = [];
    offset = 0;
    partial = "";
  };
  const read = (): boolean => {
    const fd = openSync(file, "r");
    try {
      if (fstatSync(fd).size < offset) restart();
      const buf = Buffer.alloc(1 << 20);
      for (;;) {
        const n = readSync(fd, buf, 0, buf.length, offset);
        if (n <= 0) break;
        offset += n;
        partial += buf.subarray(0, n).toString("latin1");
      }
    } finally {
      closeSync(fd);
    }
    const lines = partial.split("\n");
    partial = lines.pop() ?? "";
    const ms = Date.now() - t0;
    for (const l of lines) {
      if (!l.trim()) continue;
      let event: EngineEvent & { sequence?: number };
      try {
        event = JSON.parse(Buffer.from(l, "latin1").toString("utf8")) as typeof event;
      } catch {
        return false;
      }
      const last = out.at(-1)?.event as { sequence?: number } | undefined;
      if ((event.sequence ?? 0) !== (last ? (last.sequence ?? 0) + 1 : 0)) return false;
      out.push({ ms, event });
    }
    return true;
  };
  const poll = () => {
    if (!existsSync(file)) return;
    if (!read()) {
      restart();
      read();
    }
  };
  const timer = setInterval(poll, 100);
  return {
    stop() {
      clearInterval(timer);
      poll();
      return out;
    },
  };
}

export interface Span {
  urn: string;
  /** `Kind name`, the stack prefix taken off the name, e.g. `NativeBuild build-spark-1`. */
  label: string;
  kind: string;
  op: string;
  /** Seconds since the command started. */
  start: number;
  end: number;
  failed: boolean;
}

const nameOf = (urn: string) => urn.slice(urn.lastIndexOf("::") + 2);
const kindOf = (type: string) => type.slice(type.lastIndexOf(":") + 1);
const isCustom = (type: string) => type.startsWith("pulumi-nodejs:dynamic/");

/** The spans of the run's steps on sparkform's resources (not the preview's, not `same` steps). */
export function spans(events: readonly Stamped[], stack: string): Span[] {
  const open = new Map<string, Span>();
  const done: Span[] = [];
  for (const { ms, event: e } of events) {
    const pre = e.resourcePreEvent;
    if (pre && !pre.planning && isCustom(pre.metadata.type) && pre.metadata.op !== "same") {
      const m = pre.metadata;
      const name = nameOf(m.urn);
      open.set(m.urn, {
        urn: m.urn,
        label: `${kindOf(m.type)} ${name.startsWith(`${stack}-`) ? name.slice(stack.length + 1) : name}`,
        kind: kindOf(m.type),
        op: m.op,
        start: ms / 1000,
        end: NaN,
        failed: false,
      });
    }
    const fin = e.resOutputsEvent ?? e.resOpFailedEvent;
    const s = fin && !("planning" in fin && fin.planning) ? open.get(fin.metadata.urn) : undefined;
    if (s) {
      s.end = ms / 1000;
      s.failed = Boolean(e.resOpFailedEvent);
      open.delete(s.urn);
      done.push(s);
    }
  }
  return done.sort((a, b) => a.start - b.start);
}

/** The providers' progress lines (diagnostics, not the ephemeral ones), when each appeared. */
export function progressLines(events: readonly Stamped[]): { at: number; message: string }[] {
  return events.flatMap(({ ms, event: e }) =>
    e.diagnosticEvent && !e.diagnosticEvent.ephemeral && e.diagnosticEvent.severity !== "debug"
      ? [{ at: ms / 1000, message: e.diagnosticEvent.message.trim() }]
      : [],
  );
}

/** When the run's first step started (what came before: program start, preview, policy packs). */
export function firstStep(events: readonly Stamped[]): number {
  const e = events.find((x) => x.event.resourcePreEvent && !x.event.resourcePreEvent.planning);
  return e ? e.ms / 1000 : NaN;
}

export interface StateResource {
  urn: string;
  type: string;
  parent?: string;
  dependencies?: string[];
}

export interface PathStep {
  label: string;
  start: number;
  end: number;
  seconds: number;
  /** Seconds between the previous step's end and this one's start (the engine, the program). */
  waited: number;
}

/**
 * The critical path: from the step that finished last, back through the dependency (a component
 * stands for every resource under it) that finished last, to a step with none.
 */
export function criticalPath(ss: readonly Span[], state: readonly StateResource[]): PathStep[] {
  const byUrn = new Map(ss.map((s) => [s.urn, s]));
  const children = new Map<string, string[]>();
  for (const r of state) {
    if (r.parent) children.set(r.parent, [...(children.get(r.parent) ?? []), r.urn]);
  }
  const typeOf = new Map(state.map((r) => [r.urn, r.type]));
  const customUnder = (urn: string): string[] =>
    isCustom(typeOf.get(urn) ?? "") ? [urn] : (children.get(urn) ?? []).flatMap(customUnder);
  const depsOf = (urn: string): Span[] =>
    (state.find((r) => r.urn === urn)?.dependencies ?? [])
      .flatMap(customUnder)
      .flatMap((u) => (byUrn.has(u) ? [byUrn.get(u)!] : []));
  let cur = [...ss].sort((a, b) => b.end - a.end)[0];
  const chain: Span[] = [];
  while (cur && !chain.includes(cur)) {
    chain.unshift(cur);
    cur = depsOf(cur.urn)
      .filter((d) => d.end <= cur!.start + 0.5)
      .sort((a, b) => b.end - a.end)[0];
  }
  return chain.map((s, i) => ({
    label: s.label,
    start: s.start,
    end: s.end,
    seconds: s.end - s.start,
    waited: i === 0 ? s.start : s.start - chain[i - 1]!.end,
  }));
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** A Gantt chart of the spans (SVG): one row per resource, the critical path in red. */
export function ganttSvg(
  ss: readonly Span[],
  critical: readonly PathStep[],
  title: string,
  total: number,
): string {
  const rowH = 20;
  const left = 300;
  const W = 1200;
  const top = 60;
  const H = top + ss.length * rowH + 50;
  const scale = (W - left - 30) / Math.max(total, 1);
  const x = (t: number) => left + t * scale;
  const onPath = new Set(critical.map((c) => c.label));
  const step = total > 300 ? 60 : total > 120 ? 30 : total > 40 ? 10 : 5;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">`,
    `<rect width="${W}" height="${H}" fill="#ffffff"/>`,
    `<text x="20" y="28" font-family="DejaVu Sans" font-size="18" font-weight="bold">${esc(title)}</text>`,
    `<text x="20" y="48" font-family="DejaVu Sans" font-size="12" fill="#424242">red: the critical path; grey: other steps; the axis is seconds since the command started</text>`,
  ];
  for (let t = 0; t <= total; t += step) {
    parts.push(
      `<line x1="${x(t)}" y1="${top - 4}" x2="${x(t)}" y2="${H - 40}" stroke="#e0e0e0"/>`,
      `<text x="${x(t)}" y="${H - 24}" font-family="DejaVu Sans" font-size="11" text-anchor="middle">${t}</text>`,
    );
  }
  ss.forEach((s, i) => {
    const y = top + i * rowH;
    const crit = onPath.has(s.label);
    parts.push(
      `<text x="${left - 8}" y="${y + 14}" font-family="DejaVu Sans" font-size="11" text-anchor="end"${crit ? ' font-weight="bold"' : ""}>${esc(s.label)}</text>`,
      `<rect x="${x(s.start)}" y="${y + 3}" width="${Math.max(1, (s.end - s.start) * scale)}" height="${rowH - 6}" fill="${s.failed ? "#000000" : crit ? "#c62828" : "#90a4ae"}"/>`,
      `<text x="${x(s.end) + 4}" y="${y + 14}" font-family="DejaVu Sans" font-size="10" fill="#616161">${(s.end - s.start).toFixed(1)} s</text>`,
    );
  });
  parts.push("</svg>");
  return parts.join("\n");
}
