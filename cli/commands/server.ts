// `sparkform server logs [N]` and `sparkform server status`: the stack's llama-server on its
// node, through the same transport and the same node program as the provider's refresh
// (native/unit/status.py, as serverStatusCommand builds it), so what they print is what
// `pulumi refresh` would judge.
import { parseArgs } from "node:util";
import { parseServerStatus, parsePlacement } from "../../components/serving/node-output";
import { describeApis } from "../../components/serving/apis";
import { describeSeen } from "../../components/serving/verdicts";
import { serverStatusCommand, serverUnit } from "../../components/serving/commands";
import { openNode } from "../../components/transport";
import { out, terminalSafe, UsageError } from "../errors";
import { readStack, type StackView } from "../stack";
import { SERVER_BIND_DEFAULT, SERVER_PORT_DEFAULT } from "../../components/serving/config";

export const usage = `usage: sparkform server logs [N] [--stack S]
       sparkform server status [--stack S] [--json]
  logs      the last N lines of the server's log on its node (default 100)
  status    the unit as systemd sees it, GET /health, where the model landed (from the log),
            and the last smoke generation (from the stack's outputs)
  --stack S the stack (default: the selected one)`;

interface ServerView {
  node: string;
  port: number;
  bind: string;
  binary: string;
}

/**
 * Where the stack's server runs: as its LlamaServer recorded it at the last `up` (the client
 * node's, not a standby replica's); before the first `up`, where config will put it.
 */
export function serverOf(view: Pick<StackView, "recorded" | "config">): ServerView {
  const cfg = view.config.server;
  const configured = cfg?.node ?? view.config.worker?.client;
  const servers = view.recorded.server;
  // A config edit since `up` (the server moved) does not move the running server: the one the
  // state recorded answers until the next `up`.
  const rec =
    (configured ? servers[configured] : undefined) ??
    Object.values(servers).find((s) => !s.standby);
  if (rec) return { node: rec.node, port: rec.port, bind: rec.bind, binary: rec.binary };
  const node = configured;
  if (!node)
    throw new Error(
      "the stack has no server: set sparkform:server (and sparkform:worker) and run `pulumi up`",
    );
  return {
    node,
    port: cfg?.port ?? SERVER_PORT_DEFAULT,
    bind: cfg?.bind ?? SERVER_BIND_DEFAULT,
    binary: "",
  };
}

/**
 * Print the last `lines` lines of the server's log, line by line as they arrive, each made
 * terminal-safe: the log holds whatever the server and the model's tokens wrote. tail's own
 * complaint (no log yet) is printed only when it failed.
 */
export async function serverLogs(view: StackView, lines: number): Promise<number> {
  const s = serverOf(view);
  const complaint: string[] = [];
  const r = await openNode(view.target(s.node)).run(
    {
      script: 'tail -n "$1" "$HOME/.cache/sparkform/serving/server-$2.log"',
      args: [String(lines), String(s.port)],
      display: `tail -n ${lines} ~/.cache/sparkform/serving/server-${s.port}.log`,
    },
    {
      step: `server logs on ${s.node}`,
      okExitCodes: [0, 1],
      onLine: (line, stream) => (stream === "stdout" ? out(line) : complaint.push(line)),
    },
  );
  if (r.exitCode !== 0) process.stderr.write(terminalSafe(`${complaint.join("\n")}\n`));
  return r.exitCode;
}

export async function run(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    options: { stack: { type: "string" }, json: { type: "boolean" } },
    allowPositionals: true,
    strict: true,
  });
  const [sub, n] = positionals;
  if (sub !== "logs" && sub !== "status") throw new UsageError("give `logs [N]` or `status`");
  const view = readStack(values.stack);
  if (sub === "logs") {
    const lines = n === undefined ? 100 : Number(n);
    if (!Number.isInteger(lines) || lines < 1)
      throw new UsageError(`N must be a positive integer, not ${n}`);
    return serverLogs(view, lines);
  }
  const s = serverOf(view);
  const node = openNode(view.target(s.node));
  const r = await node.run(serverStatusCommand(s, {}), {
    step: `server status on ${s.node}`,
    timeoutMs: 60_000,
  });
  const st = parseServerStatus(r.stdout, s.node);
  const smoke = view.outputs.serving?.smoke;
  const seen = parsePlacement(st.log);
  if (values.json) {
    out(
      JSON.stringify(
        { node: s.node, name: serverUnit(s.port), ...st, placement: seen.devices, smoke },
        null,
        2,
      ),
    );
    return 0;
  }
  const u = st.unit;
  out(
    [
      `${serverUnit(s.port)} on ${s.node}: ${u.ActiveState}/${u.SubState} (result ${u.Result}, restarts ${u.NRestarts}, pid ${u.MainPID})`,
      `health: GET http://${s.bind}:${s.port}/health → ${st.health.status || "no answer"} ${st.health.body.trim()}`,
      `listening: ${st.listening.join(", ") || "nothing"}`,
      `placement (log): ${describeSeen(seen)}`,
      ...(smoke
        ? [
            `smoke: ${smoke.tokenCount} tokens (sha256 ${smoke.tokensSha256.slice(0, 12)}) at ${Number(smoke.tokensPerSecond).toFixed(1)} tokens/s; ` +
              `identical to one node: ${String(smoke.identical)}; graph_compute ${String(smoke.graphCompute)}, graph_recompute ${String(smoke.graphRecompute)}`,
            `apis: ${describeApis(smoke.apis)}`,
          ]
        : []),
      ...(smoke?.readiness
        ? [
            `ready at its last start: first token in ${smoke.readiness.firstTokenSeconds.toFixed(2)} s (TTFT, streamed chat); ` +
              `port open ${smoke.readiness.portOpenSeconds.toFixed(1)} s, /health 200 ${smoke.readiness.healthSeconds.toFixed(1)} s after the unit's start`,
          ]
        : []),
    ].join("\n"),
  );
  return u.ActiveState === "active" && st.health.status === 200 ? 0 : 1;
}
