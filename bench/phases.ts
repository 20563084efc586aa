// Where a pulumi command's seconds go, from the engine's own log (`--logtostderr -v=9
// --logflow`): the time between marker lines that every run prints.
export interface Phase {
  phase: string;
  seconds: number;
}

interface Line {
  t: number;
  msg: string;
}

function lines(log: string): Line[] {
  const out: Line[] = [];
  for (const raw of log.split("\n")) {
    if (!raw.startsWith("{")) continue;
    try {
      const j = JSON.parse(raw) as { time?: string; msg?: string };
      if (j.time && j.msg !== undefined) out.push({ t: Date.parse(j.time) / 1000, msg: j.msg });
    } catch {
      // not a log line
    }
  }
  return out;
}

const MARKERS: [string, RegExp][] = [
  ["packLaunch", /Launching plugin '.*\(analyzer\)'/],
  ["packReady", /Analyzer\[.*\]\.GetAnalyzerInfo\(\) executing/],
  ["run", /langhost\[nodejs\]\.Run\(.*executing/],
  ["programRpc", /ResourceMonitor\.SupportsFeature/],
  ["firstRegister", /RegisterResource received: t=(?!pulumi:pulumi:Stack)/],
  ["providerLaunch", /Launching plugin 'pulumi-nodejs \(resource\)'/],
  ["providerReady", /Provider\[.*\]\.(Configure|Read|Check)\(/],
  ["runDone", /langhost\[nodejs\]\.Run\(.*success/],
];

/** Phases of one run; `wall` is the whole command as timed from outside. */
export function breakdown(log: string, wall: number): Phase[] {
  const ls = lines(log);
  if (ls.length === 0) return [{ phase: "total (wall)", seconds: wall }];
  const t0 = ls[0]!.t;
  const at: Record<string, number> = {};
  for (const [name, re] of MARKERS) {
    const hit = ls.find((l) => re.test(l.msg));
    if (hit) at[name] = hit.t - t0;
  }
  const end = ls[ls.length - 1]!.t - t0;
  const span = (phase: string, from?: number, to?: number): Phase[] =>
    from !== undefined && to !== undefined && to >= from ? [{ phase, seconds: to - from }] : [];
  const firstPlugin = at.packLaunch ?? at.run ?? at.providerLaunch;
  return [
    { phase: "process start until the engine logs (CLI exec)", seconds: Math.max(0, wall - end) },
    ...span("CLI: stack, config, VCS metadata, language host", 0, firstPlugin),
    ...span("policy pack start (node, SDK, pack loaded)", at.packLaunch, at.packReady),
    ...span("program: node + SDK + loader until its first RPC", at.run, at.programRpc),
    ...span(
      "program: module graph + stack construction (control digest, model resolution)",
      at.programRpc,
      at.firstRegister,
    ),
    ...span("provider process start (node, SDK)", at.providerLaunch, at.providerReady),
    ...span(
      "resource steps (check/diff/read; provider modules; nodes over ssh)",
      at.providerReady,
      at.runDone ?? end,
    ),
    ...span("after the program (stack analysis, state, exit)", at.runDone, end),
    { phase: "total (wall)", seconds: wall },
  ];
}
