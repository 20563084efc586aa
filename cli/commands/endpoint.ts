// `sparkform endpoint`: the stack's OpenAI-compatible endpoint on this machine. The CLI itself
// listens on 127.0.0.1:<port> of the control node (a laptop), bound before anything is printed,
// and pipes each connection through the stack's pinned ssh connection (`ssh -W host:port` over
// its control master) to the router on the client node, which listens on that node's loopback
// only: any OpenAI client then works at http://127.0.0.1:<port>/v1, and nothing between this
// machine and the client node is unencrypted.
//
// Why the CLI owns the listener: ssh's own `-L` listener came up after a probe of the port had
// let it go, and a local process that took the port in between got the clients' requests and
// their key while this command said "ready".
import { createServer, type Server, type Socket } from "node:net";
import type { Readable, Writable } from "node:stream";
import { parseArgs } from "node:util";
import { describeApis } from "../../components/serving/apis";
import type { ApiVerdict, ServedApi } from "../../components/serving/state";
import { type NodeConnection, openNode } from "../../components/transport";
import { out, UsageError } from "../errors";
import type { StackOutputs } from "../../stack-outputs";
import { readStack } from "../stack";

export const summary = "the stack's OpenAI-compatible endpoint on this machine, through ssh";
export const usage = `usage: sparkform endpoint [--stack S] [--port P]
  Listens on 127.0.0.1:P on this machine and pipes each connection through the stack's pinned
  ssh connection to the router on the client node (in front of the llama-server or its
  replicas), prints the base URL for OpenAI clients (http://127.0.0.1:P/v1), and stays until
  interrupted (Ctrl-C).
  --stack S   the stack (default: the selected one)
  --port P    the local port (default: the router's own port)`;

/**
 * The served endpoint as the stack's outputs record it: the router (`serving.endpoint`, on the
 * client node), else, for a stack made before the router, the server itself (`serving.server`).
 */
export function servedEndpoint(outputs: StackOutputs): {
  node: string;
  host: string;
  port: number;
  what: "router" | "server";
} {
  const server = outputs.serving?.server;
  const router = outputs.serving?.endpoint;
  const m = /^http:\/\/\[?([^\]]+?)\]?:(\d+)$/.exec(router || server?.url || "");
  if (!server?.node || !m)
    throw new Error(
      "the stack serves nothing yet (no serving.server in its outputs): set sparkform:server and run `pulumi up`",
    );
  return {
    node: server.node,
    host: m[1] as string,
    port: Number(m[2]),
    what: router ? "router" : "server",
  };
}

/** One connection's way to the node: what the client sends goes in, what the node answers comes out. */
export interface EndpointStream {
  readonly input: Writable;
  readonly output: Readable;
  /** End it (the ssh of this connection). */
  close(): void;
}

/** How the listener reaches the endpoint on the node (sshTransport, or a stub in tests). */
export interface EndpointTransport {
  /** An end-to-end check through the transport; "ready" is printed only after it passed. */
  check(): Promise<void>;
  /** A stream for one accepted connection. */
  open(): EndpointStream;
}

/** Pipe one accepted connection through a stream of `transport`, ending each with the other. */
function pipeThrough(socket: Socket, transport: EndpointTransport): void {
  let stream: EndpointStream;
  try {
    stream = transport.open();
  } catch (e) {
    process.stderr.write(`sparkform endpoint: a connection was dropped: ${(e as Error).message}\n`);
    socket.destroy();
    return;
  }
  const end = () => {
    stream.close();
    socket.destroy();
  };
  socket.on("error", end);
  socket.on("close", () => stream.close());
  stream.input.on("error", end);
  stream.output.on("error", end);
  socket.pipe(stream.input);
  stream.output.pipe(socket);
}

/**
 * Listen on 127.0.0.1:`port` (this process holds it from here on: no probe to lose it in), then
 * check the way through `transport`; each connection is piped through a stream of its own. A
 * port in use is a UsageError; a failed check lets the port go and throws it.
 */
export async function listenEndpoint(port: number, transport: EndpointTransport): Promise<Server> {
  const server = createServer((socket) => pipeThrough(socket, transport));
  await new Promise<void>((resolve, reject) => {
    server.once("error", (e: NodeJS.ErrnoException) =>
      reject(
        e.code === "EADDRINUSE" || e.code === "EACCES"
          ? new UsageError(
              `127.0.0.1:${port} is in use on this machine: give another with --port (e.g. --port ${port + 10})`,
            )
          : e,
      ),
    );
    server.listen({ port, host: "127.0.0.1", exclusive: true }, () => resolve());
  });
  try {
    await transport.check();
  } catch (e) {
    await new Promise((r) => server.close(r));
    throw e;
  }
  return server;
}

/** An HTTP answer through `stream` (any status: the router's 401 is one), else the reason. */
function httpAnswer(stream: EndpointStream, hostPort: string, why: () => string): Promise<void> {
  return new Promise((resolve, reject) => {
    let got = "";
    const timer = setTimeout(() => done(new Error(`no answer within 30 s (${why()})`)), 30_000);
    const done = (err?: Error) => {
      clearTimeout(timer);
      stream.close();
      if (err) reject(err);
      else resolve();
    };
    stream.output.on("data", (d: Buffer) => {
      got += d.toString("latin1");
      if (got.length >= 5) done(got.startsWith("HTTP/") ? undefined : new Error("not HTTP"));
    });
    stream.output.once("end", () => done(new Error(why() || "the stream ended")));
    stream.output.once("error", (e) => done(e));
    stream.input.on("error", () => undefined);
    stream.input.end(`HEAD / HTTP/1.0\r\nHost: ${hostPort}\r\n\r\n`);
  });
}

/**
 * The stack's ssh connection to the client node as the endpoint's transport: each stream an
 * `ssh -W host:port` through the control master; the check a command on the node (the master
 * up, its errors the transport's own) and then an HTTP answer from host:port through a stream.
 */
export function sshTransport(
  conn: Pick<NodeConnection, "run" | "stdioForward">,
  served: { node: string; host: string; port: number; what: string },
): EndpointTransport {
  const hostPort = `${served.host}:${served.port}`;
  const open = (): EndpointStream & { stderr: () => string } => {
    const ssh = conn.stdioForward(served.host, served.port);
    let stderr = "";
    ssh.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
    if (!ssh.stdin || !ssh.stdout) throw new Error("ssh has no stdin/stdout");
    return {
      input: ssh.stdin,
      output: ssh.stdout,
      close: () => {
        if (ssh.exitCode === null) ssh.kill("SIGTERM");
      },
      stderr: () => stderr.trim(),
    };
  };
  return {
    async check() {
      await conn.run(["true"], { step: "endpoint: connect", timeoutMs: 60_000 });
      const s = open();
      await httpAnswer(s, hostPort, s.stderr).catch((e: unknown) => {
        throw new Error(
          `reached ${served.node} through ssh, but the ${served.what} on ${hostPort} there did not answer: ` +
            `${(e as Error).message}. Check it with \`sparkform server status\`, or run \`pulumi up\``,
        );
      });
    },
    open,
  };
}

/**
 * What `sparkform endpoint` prints once it is ready: the URL, the way, the key, and the other
 * APIs the server speaks as its smoke found them (`apis`: the outputs' serving.smoke.apis).
 */
export function readyLines(
  port: number,
  served: { node: string; host: string; port: number; what: string },
  stack?: string,
  apis?: Partial<Record<ServedApi, ApiVerdict>>,
  models?: readonly string[],
): string[] {
  const key = `$(sparkform key${stack ? ` --stack ${stack}` : ""})`;
  // The key is never printed here: a terminal's scrollback and a screen share are not secrets.
  return [
    `OpenAI-compatible endpoint: http://127.0.0.1:${port}/v1`,
    `  through ssh to ${served.node}, where the ${served.what} listens on ${served.host}:${served.port}`,
    `  API key (every request but GET /health needs it): export OPENAI_API_KEY=${key}`,
    `  APIs: ${describeApis(apis)}`,
    // Several models side by side (sparkform:server.models): the request's model picks one.
    ...(models !== undefined && models.length > 1
      ? [
          `  models: ${models.join(", ")} (a request's "model" picks the server; GET /v1/models lists them)`,
        ]
      : []),
    // The Anthropic SDK appends /v1/messages to its base URL (OpenAI's SDK wants /v1 in it).
    ...(apis?.messages?.verdict === "supported"
      ? [
          `  Anthropic SDK: export ANTHROPIC_BASE_URL=http://127.0.0.1:${port} ANTHROPIC_API_KEY=${key}`,
        ]
      : []),
    "  Ctrl-C to stop",
  ];
}

export async function run(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { stack: { type: "string" }, port: { type: "string" } },
    strict: true,
  });
  if (values.port !== undefined && !/^\d+$/.test(values.port))
    throw new UsageError(`--port ${JSON.stringify(values.port)}: give a port number (1024–65535)`);
  const view = readStack(values.stack);
  const served = servedEndpoint(view.outputs);
  const port = values.port !== undefined ? Number(values.port) : served.port;
  if (port < 1024 || port > 65535)
    throw new UsageError(`--port ${port}: give a port from 1024 to 65535`);
  const conn = openNode(view.target(served.node));
  const server = await listenEndpoint(port, sshTransport(conn, served));
  const sockets = new Set<Socket>();
  server.on("connection", (c: Socket) => {
    sockets.add(c);
    c.once("close", () => sockets.delete(c));
  });
  const serving = view.outputs.serving;
  const models = serving?.served?.map((m) => m.model);
  for (const line of readyLines(port, served, view.name, serving?.smoke?.apis, models)) out(line);
  // Until Ctrl-C (or SIGTERM): then the listener ends, and each connection with its ssh.
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.removeListener("SIGINT", stop);
      process.removeListener("SIGTERM", stop);
      server.close(() => resolve());
      for (const c of sockets) c.destroy();
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  return 0;
}
