// Progress lines from inside a dynamic provider, shown in the `pulumi up` output.
//
// A dynamic provider's methods run in their own process, where @pulumi/pulumi's `log` has no
// engine to talk to. That process is started with the engine's address as its first argument,
// so this module opens its own client to the engine's Log RPC. Outside a provider process (unit
// tests calling an implementation directly) lines go to stderr.
/* eslint-disable @typescript-eslint/no-require-imports -- loaded lazily, only in provider processes */
import type { EngineClient } from "@pulumi/pulumi/proto/engine_grpc_pb";

let client: EngineClient | null | undefined;

function engine(): EngineClient | null {
  if (client !== undefined) return client;
  const script = process.argv[1] ?? "";
  const addr = process.argv[2];
  if (!/dynamic-provider/.test(script) || !addr) return (client = null);
  const grpc = require("@grpc/grpc-js") as typeof import("@grpc/grpc-js");
  const { EngineClient: Client } =
    require("@pulumi/pulumi/proto/engine_grpc_pb") as typeof import("@pulumi/pulumi/proto/engine_grpc_pb");
  client = new Client(addr, grpc.credentials.createInsecure());
  return client;
}

/**
 * Say what a long step is doing: `[spark-2] build: configure done in 12 s`. `ephemeral` lines
 * only update the live status (download percentages); others stay in the diagnostics.
 */
export function progress(message: string, opts: { ephemeral?: boolean } = {}): Promise<void> {
  const c = engine();
  if (!c) {
    process.stderr.write(`${message}\n`);
    return Promise.resolve();
  }
  const { LogRequest, LogSeverity } =
    require("@pulumi/pulumi/proto/engine_pb") as typeof import("@pulumi/pulumi/proto/engine_pb");
  const req = new LogRequest();
  req.setSeverity(LogSeverity.INFO);
  req.setMessage(message);
  req.setEphemeral(Boolean(opts.ephemeral));
  // Progress is best effort: a lost line must never fail the step it reports on.
  return new Promise((resolve) => c.log(req, () => resolve()));
}

/** Elapsed seconds since `start` (a `Date.now()` value), for progress lines. */
export function since(start: number): string {
  return `${((Date.now() - start) / 1000).toFixed(1)} s`;
}
