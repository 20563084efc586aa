// Issue 33 item 5: `sparkform endpoint` owns its listener. It used to probe the port (bind,
// close) and then let ssh bind it: a local process that took the port in between received the
// clients' requests and their API key while the CLI printed "ready". Now the CLI binds
// 127.0.0.1:<port> itself, first, and pipes each connection through the stack's ssh connection
// (`ssh -W host:port` over the control master). Here the transport is a stub: the listener is
// ours and bound before the end-to-end check (and so before "ready"), each connection is piped
// through the transport, a port already taken is refused, and a failed check frees the port.
import { connect, createServer, type Server } from "node:net";
import { PassThrough } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { type EndpointTransport, listenEndpoint } from "../../cli/commands/endpoint";
import { UsageError } from "../../cli/errors";

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A port free right now (bound to 0 by us, then let go). */
async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const { port } = s.address() as { port: number };
  await new Promise((r) => s.close(r));
  return port;
}

/** Whether a TCP connect to 127.0.0.1:port is accepted. */
const accepts = (port: number) =>
  new Promise<boolean>((resolve) => {
    const c = connect(port, "127.0.0.1");
    c.once("connect", () => {
      c.destroy();
      resolve(true);
    });
    c.once("error", () => resolve(false));
  });

/** A transport whose streams echo what they get, prefixed, as a remote endpoint would answer. */
function echoTransport(checkSees: { bound?: boolean }, port: () => number) {
  const opened: string[] = [];
  const t: EndpointTransport = {
    check: async () => {
      checkSees.bound = await accepts(port());
    },
    open: () => {
      opened.push("stream");
      const input = new PassThrough();
      const output = new PassThrough();
      input.on("data", (d: Buffer) => output.write(`node saw: ${d.toString()}`));
      input.on("end", () => output.end());
      return { input, output, close: () => output.destroy() };
    },
  };
  return { t, opened };
}

describe("sparkform endpoint's listener (issue 33 item 5)", () => {
  it("is bound by this process before the end-to-end check, and pipes each connection through the transport", async () => {
    const port = await freePort();
    const seen: { bound?: boolean } = {};
    const { t, opened } = echoTransport(seen, () => port);
    const server = await listenEndpoint(port, t);
    servers.push(server);
    expect(server.address()).toEqual({ address: "127.0.0.1", family: "IPv4", port });
    expect(seen.bound).toBe(true);
    const reply = await new Promise<string>((resolve, reject) => {
      const c = connect(port, "127.0.0.1");
      let got = "";
      c.on("data", (d: Buffer) => {
        got += d.toString();
        if (got.includes("\n")) {
          c.end();
          resolve(got);
        }
      });
      c.once("error", reject);
      c.write("GET /v1/models\n");
    });
    expect(reply).toBe("node saw: GET /v1/models\n");
    // One stream per accepted connection: the stub check's own connect, then the client's.
    expect(opened).toEqual(["stream", "stream"]);
  });

  it("refuses a port another process holds, saying so and what to do", async () => {
    const port = await freePort();
    const other = createServer();
    await new Promise<void>((r) => other.listen(port, "127.0.0.1", r));
    servers.push(other);
    const { t, opened } = echoTransport({}, () => port);
    const err = await listenEndpoint(port, t).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toBe(
      `127.0.0.1:${port} is in use on this machine: give another with --port (e.g. --port ${port + 10})`,
    );
    expect(opened).toEqual([]);
  });

  it("a failed end-to-end check lets the port go and says why", async () => {
    const port = await freePort();
    const t: EndpointTransport = {
      check: () => Promise.reject(new Error("ssh: connect to host 192.168.1.4: No route to host")),
      open: () => {
        throw new Error("no stream without a check");
      },
    };
    await expect(listenEndpoint(port, t)).rejects.toThrow(/No route to host/);
    expect(await accepts(port)).toBe(false);
  });
});
