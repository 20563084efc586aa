// `sparkform endpoint`: the stack's OpenAI-compatible endpoint on this machine. A port forward
// from the control node (a laptop) through the stack's pinned ssh transport to the server on
// the client node, which listens on that node's loopback only: any OpenAI client then works
// at http://127.0.0.1:<port>/v1, and nothing crosses the network unencrypted.
import { createServer } from "node:net";
import { parseArgs } from "node:util";
import { openNode } from "../../components/transport";
import { out, UsageError } from "../errors";
import type { StackOutputs } from "../../stack-outputs";
import { readStack } from "../stack";

export const summary = "the stack's OpenAI-compatible endpoint on this machine, through ssh";
export const usage = `usage: sparkform endpoint [--stack S] [--port P]
  Forwards 127.0.0.1:P on this machine through the stack's pinned ssh connection to the
  router on the client node (in front of the llama-server or its replicas), prints the base URL for OpenAI clients
  (http://127.0.0.1:P/v1), and stays until interrupted (Ctrl-C).
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

function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once("error", () => resolve(false));
    probe.listen(port, "127.0.0.1", () => probe.close(() => resolve(true)));
  });
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
  if (!(await portFree(port)))
    throw new UsageError(
      `127.0.0.1:${port} is in use on this machine: give another with --port (e.g. --port ${port + 10})`,
    );
  const ssh = openNode(view.target(served.node)).forwardPort({
    bind: "127.0.0.1",
    port,
    host: served.host,
    hostPort: served.port,
  });
  let stderr = "";
  ssh.stderr?.on("data", (d: Buffer) => (stderr += d.toString()));
  // Ready when the local port answers (ssh listens once authenticated), or ssh gave up.
  for (let i = 0; i < 100 && ssh.exitCode === null && (await portFree(port)); i++)
    await new Promise((r) => setTimeout(r, 100));
  if (ssh.exitCode !== null || (await portFree(port))) {
    ssh.kill();
    throw new Error(
      `the port forward to ${served.node} did not come up: ${stderr.trim() || "ssh exited"}. ` +
        "Check the node is reachable (`sparkform doctor`)",
    );
  }
  out(`OpenAI-compatible endpoint: http://127.0.0.1:${port}/v1`);
  out(
    `  through ssh to ${served.node}, where the ${served.what} listens on ${served.host}:${served.port}; ` +
      "API key: the stack's sparkform:serverApiKey if it sets one (`pulumi config get sparkform:serverApiKey`), else any value",
  );
  out("  Ctrl-C to stop");
  // Ctrl-C reaches ssh too (one process group): an end we asked for is not a failure.
  let stopping = false;
  const code = await new Promise<number>((resolve) => {
    const stop = () => {
      stopping = true;
      ssh.kill("SIGTERM");
    };
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
    ssh.once("exit", (c) => {
      process.removeListener("SIGINT", stop);
      process.removeListener("SIGTERM", stop);
      resolve(stopping ? 0 : (c ?? 1));
    });
  });
  if (code !== 0) process.stderr.write(`sparkform endpoint: ssh ended: ${stderr.trim()}\n`);
  return code;
}
