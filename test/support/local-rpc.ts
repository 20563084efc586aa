// Local ggml-rpc-server processes for tests that run the host build of llama.cpp
// (sim/llama buildLlamaHost): a free port, waiting for the listener, stopping what was started.
import { type ChildProcess, spawn } from "node:child_process";
import * as net from "node:net";
import { freePort } from "../../sim/world/free-port";

export { freePort };

export async function waitForPort(port: number, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    const ok = await new Promise<boolean>((r) => {
      const c = net.connect(port, "127.0.0.1");
      c.once("connect", () => {
        c.destroy();
        r(true);
      });
      c.once("error", () => r(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing listens on 127.0.0.1:${port} after ${ms} ms`);
}

export async function stop(p: ChildProcess): Promise<void> {
  if (p.exitCode !== null || p.signalCode !== null) return;
  const exited = new Promise<void>((r) => p.once("exit", () => r()));
  p.kill("SIGTERM");
  const t = setTimeout(() => p.kill("SIGKILL"), 5000);
  await exited;
  clearTimeout(t);
}

/** Start `rpcServer` on a free loopback port; it is pushed to `started`. Returns host:port. */
export async function startRpcServer(rpcServer: string, started: ChildProcess[]): Promise<string> {
  const port = await freePort();
  const server = spawn(rpcServer, ["-H", "127.0.0.1", "-p", String(port)], {
    stdio: ["ignore", "ignore", "ignore"],
  });
  started.push(server);
  await waitForPort(port, 20_000);
  return `127.0.0.1:${port}`;
}
