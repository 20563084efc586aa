// native/fabric/rail-rtt-throughput.py over loopback, with real sockets: the server binds one address, the
// client measures RTT and throughput through it, both print one JSON line the parser accepts;
// failures (nothing listening, a client that never comes) are bounded and reported.
import { spawn, spawnSync } from "node:child_process";
import { describe, expect, it } from "vitest";
import {
  clientArgs,
  parseListening,
  parseProbe,
  probeScript,
  serverArgs,
} from "../../components/fabric/probe";

/** Run the probe the way the provider does: the script on stdin to `python3 -`. */
function startServer(args: string[]) {
  const child = spawn("python3", ["-", ...args], { stdio: ["pipe", "pipe", "pipe"] });
  child.stdin.end(probeScript());
  let out = "";
  const firstLine = new Promise<string>((resolve, reject) => {
    child.stdout.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes("\n")) resolve(out.split("\n")[0] as string);
    });
    child.on("exit", (code) => reject(new Error(`server exited ${code}: ${out}`)));
  });
  const done = new Promise<{ code: number | null; out: string }>((resolve) =>
    child.on("close", (code) => resolve({ code, out })),
  );
  return { firstLine, done };
}

function client(args: string[]) {
  const r = spawnSync("python3", ["-", ...args], { input: probeScript(), encoding: "utf8" });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe("fabric probe over loopback", () => {
  it("measures RTT percentiles and throughput that crossed the socket, pinned to allowed CPUs", async () => {
    const srv = startServer(serverArgs("127.0.0.1", 30, [0]));
    const port = parseListening(await srv.firstLine, "server");
    // CPU 4095 does not exist here: pinning keeps only the CPUs this process may use.
    const c = client(
      clientArgs("127.0.0.1", port, "127.0.0.1", { count: 300, seconds: 0.5, cpus: [0, 4095] }),
    );
    expect(c.stderr).toBe("");
    expect(c.code).toBe(0);
    const r = parseProbe(c.stdout, "client");
    expect(r.error).toBeNull();
    expect(r.pinned).toEqual([0]);
    expect(r.rtt?.samples).toBe(300);
    expect(r.rtt?.minUs).toBeGreaterThan(0);
    expect(r.rtt!.minUs).toBeLessThanOrEqual(r.rtt!.p50Us);
    expect(r.rtt!.p50Us).toBeLessThanOrEqual(r.rtt!.p99Us);
    expect(r.rtt!.p99Us).toBeLessThanOrEqual(r.rtt!.maxUs);
    expect(r.throughput?.bytes).toBeGreaterThan(1 << 20);
    expect(r.throughput?.seconds).toBeGreaterThan(0);
    expect(r.throughput?.gbps).toBeCloseTo(
      (r.throughput!.bytes * 8) / r.throughput!.seconds / 1e9,
      1,
    );
    const served = await srv.done;
    expect(served.code).toBe(0);
    expect(JSON.parse(served.out.trim().split("\n").pop() as string)).toEqual({
      served: [
        { kind: "R", peer: "127.0.0.1" },
        { kind: "T", peer: "127.0.0.1" },
      ],
      error: null,
    });
  });

  it("reports a refused connection as an error line, exit 3", () => {
    // Port 1 on loopback: nothing listens there.
    const c = client(clientArgs("127.0.0.1", 1, "", { count: 5, seconds: 0.1 }));
    expect(c.code).toBe(3);
    const r = parseProbe(c.stdout, "client");
    expect(r.rtt).toBeNull();
    expect(r.error).toMatch(/^ConnectionRefusedError: /);
  });

  it("a server whose client never comes gives up after its timeout", async () => {
    const t0 = Date.now();
    const srv = startServer(serverArgs("127.0.0.1", 1, []));
    parseListening(await srv.firstLine, "server");
    const done = await srv.done;
    expect(done.code).toBe(4);
    expect(done.out).toMatch(/"error": "timed out waiting for the client"/);
    // Its own 1 s timeout, not an earlier exit.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1000);
  });

  it("`quit` on the server's node stops a server whose client gave up", async () => {
    const srv = startServer(serverArgs("127.0.0.1", 30, []));
    const port = parseListening(await srv.firstLine, "server");
    expect(client(["quit", "--addr", "127.0.0.1", "--port", String(port)]).code).toBe(0);
    const done = await srv.done;
    expect(done.code).toBe(5);
    // Exit 5 and its message: `quit` ended it, not its 30 s timeout (exit 4).
    expect(done.out).toMatch(/"error": "the client gave up"/);
  });

  it("binds the address it is given, not a wildcard", async () => {
    const srv = startServer(serverArgs("127.0.0.2", 5, []));
    const port = parseListening(await srv.firstLine, "server");
    // Another loopback address on the same port is refused: only 127.0.0.2 listens.
    const other = parseProbe(
      client(clientArgs("127.0.0.1", port, "", { count: 5, seconds: 0.1 })).stdout,
      "client",
    );
    expect(other.error).toMatch(/ConnectionRefusedError/);
    const ok = parseProbe(
      client(clientArgs("127.0.0.2", port, "", { count: 5, seconds: 0.1 })).stdout,
      "client",
    );
    expect(ok.error).toBeNull();
    expect((await srv.done).code).toBe(0);
  });

  it("rejects malformed probe output naming the field", () => {
    expect(() =>
      parseProbe(
        '{"addr":"a","port":1,"pinned":null,"rtt":{"p50Us":"x"},"throughput":null,"error":null}',
        "client on spark-1",
      ),
    ).toThrow(/^client on spark-1: field rtt is malformed/);
    expect(() => parseListening("Traceback (most recent call last):", "server on spark-2")).toThrow(
      /^server on spark-2: expected one JSON line/,
    );
  });
});
