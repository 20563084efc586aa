// Proof at the wire (issue 24, item 4): the smoke reads the byte counters of the client's route
// to the workers around its generation, worker-log.py those of the interface holding the
// worker's address, and a split whose bytes crossed no fabric is refused with every end's
// number. The programs run here for real, against a stand-in llama-server on loopback (so the
// "fabric" is lo, and the smoke's own requests are the bytes it must see).
import { createServer, type Server } from "node:http";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { programPath } from "../../components/native-script";
import {
  parseSmoke,
  parseWorkerLog,
  parseWorkerLogSize,
} from "../../components/serving/node-output";
import {
  WIRE_BYTES_PER_TOKEN,
  wireEnds,
  wireProofFailure,
  wireRailNote,
  workerLogFailure,
} from "../../components/serving/verdicts";

let server: Server;
let url = "";

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = "";
    req.on("data", (c: Buffer) => (body += c.toString()));
    req.on("end", () => {
      if ((JSON.parse(body) as { stream?: boolean }).stream) {
        // The smoke's streamed chat (its time to first token): one token event, then the end.
        res.setHeader("Content-Type", "text/event-stream");
        res.end(
          `data: ${JSON.stringify({ choices: [{ delta: { content: "a" } }] })}\n\ndata: [DONE]\n\n`,
        );
        return;
      }
      res.setHeader("Content-Type", "application/json");
      if (req.url === "/completion")
        res.end(JSON.stringify({ tokens: [5, 6, 7], timings: { predicted_per_second: 12.5 } }));
      else
        res.end(
          JSON.stringify({
            choices: [{ message: { content: "abc" }, finish_reason: "length" }],
            usage: { completion_tokens: 3 },
          }),
        );
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => server?.close());

/** Run a node program here, without blocking the loop the stand-in server answers on. */
function py(program: string, args: string[]) {
  return execa("python3", [programPath(program), ...args], { reject: false, timeout: 60_000 });
}

const smokeArgs = (workers: string) => [url, "3", "42", "hello", workers];

describe("smoke.py's wire counters", () => {
  it("counts the bytes of the route to the workers around the generation and the chat", async () => {
    const r = await py("serving/smoke.py", smokeArgs("127.0.0.1"));
    expect(r.stderr).toBe("");
    const run = parseSmoke(r.stdout, "spark-1");
    expect(run.tokens).toEqual([5, 6, 7]);
    expect(run.fabric.ifaces).toEqual(["lo"]);
    // Its own three requests and their answers crossed lo: on loopback each byte is sent and received.
    expect(run.fabric.txBytes).toBeGreaterThan(200);
    expect(run.fabric.rxBytes).toBeGreaterThan(200);
  });

  it("without workers, measures nothing", async () => {
    const run = parseSmoke((await py("serving/smoke.py", smokeArgs("-"))).stdout, "spark-1");
    expect(run.fabric).toEqual({ ifaces: [], rxBytes: 0, txBytes: 0 });
  });

  it("a worker address with no route is refused, naming it", async () => {
    const r = await py("serving/smoke.py", smokeArgs("not-an-address"));
    expect(r.exitCode).not.toBe(0);
    expect(r.stderr).toMatch(/no route to the worker not-an-address on the client node/);
  });
});

describe("worker-log.py's wire counters", () => {
  it("reads the interface that holds the worker's address", async () => {
    const size = parseWorkerLogSize(
      (await py("serving/worker-log.py", ["/nonexistent/rpc.log", "size", "127.0.0.1"])).stdout,
      "spark-2",
    );
    expect(size.iface).toBe("lo");
    expect(size.rxBytes).toBeGreaterThan(0);
    const counts = parseWorkerLog(
      (await py("serving/worker-log.py", ["/nonexistent/rpc.log", "0", "127.0.0.1"])).stdout,
      "spark-2",
    );
    expect(counts).toMatchObject({ iface: "lo", graphCompute: 0, size: 0 });
    expect(counts.rxBytes).toBeGreaterThanOrEqual(size.rxBytes);
  });

  it("a log that shrank since the smoke began is reported shrunk, its old lines not counted", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "worker-log-"));
    try {
      const log = path.join(dir, "worker-50052.log");
      const decode = "[graph_compute] device: 0\n[graph_recompute] device: 0\n";
      writeFileSync(log, decode.repeat(200));
      const from = parseWorkerLogSize(
        (await py("serving/worker-log.py", [log, "size", "127.0.0.1"])).stdout,
        "spark-2",
      ).size;
      // A status read cut it in place during the smoke and it holds lines from before: the
      // smoke's own lines cannot be told from them.
      writeFileSync(log, decode.repeat(20));
      const counts = parseWorkerLog(
        (await py("serving/worker-log.py", [log, String(from), "127.0.0.1"])).stdout,
        "spark-2",
      );
      expect(counts).toMatchObject({
        shrunk: true,
        graphCompute: 0,
        graphRecompute: 0,
        recomputeAfterCompute: false,
        size: Buffer.byteLength(decode) * 20,
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("an address no interface holds reads as no interface", async () => {
    const size = parseWorkerLogSize(
      (await py("serving/worker-log.py", ["/nonexistent/rpc.log", "size", "203.0.113.77"])).stdout,
      "spark-2",
    );
    expect(size).toEqual({ size: 0, iface: "", rxBytes: 0, txBytes: 0 });
  });
});

describe("wireProofFailure", () => {
  const client = { node: "spark-1", iface: "fabric0", bytes: 48_213 };
  const worker = { node: "spark-2", iface: "fabric0", bytes: 47_900 };

  it("passes when every end carried bytes, and without workers", () => {
    expect(wireProofFailure(client, [worker])).toBeNull();
    expect(wireProofFailure({ ...client, bytes: 0 }, [])).toBeNull();
  });

  it("refuses a split whose bytes went another way, with both numbers", () => {
    expect(wireProofFailure({ ...client, bytes: 0 }, [{ ...worker, bytes: 0 }])).toBe(
      "the smoke's generation did not cross the fabric (spark-1 fabric0: 0 bytes, spark-2 fabric0: 0 bytes): " +
        "the layers on the workers were computed, but not over the rail between the nodes. Check the worker's " +
        "bind (its fabricAddress) and the client's route to it (`ip route get <worker address>` on the client " +
        "node), then `up` again.",
    );
  });

  it("refuses a worker whose address is on no interface, even if the client's route carried bytes", () => {
    expect(wireProofFailure(client, [{ ...worker, iface: "", bytes: 0 }])).toMatch(
      /spark-2 \(no interface holds the worker's address\): 0 bytes/,
    );
  });
});

describe("wireProofFailure against the Fabric stage's rails (issue 33 item 12)", () => {
  // sparkform:fabric.rails as the Fabric stage has them: spark-1 and spark-2 share rail 0.
  const rails = {
    "spark-1": [
      { rail: 0, iface: "fabric0" },
      { rail: 1, iface: "fabric1" },
    ],
    "spark-2": [{ rail: 0, iface: "fabric0" }],
  };
  const client = { node: "spark-1", iface: "fabric0", bytes: 725_296 };
  const worker = { node: "spark-2", iface: "fabric0", bytes: 725_366 };

  it("one byte on eth0 (the management network) is refused, naming it and the rail expected", () => {
    const failure = wireProofFailure(
      { node: "spark-1", iface: "eth0", bytes: 1 },
      [{ node: "spark-2", iface: "eth0", bytes: 1 }],
      { rails, tokens: 48 },
    );
    expect(failure).toMatch(/spark-1 eth0 .*not a rail/);
    expect(failure).toMatch(/spark-2 eth0 .*not a rail/);
    expect(failure).toContain("expected fabric0 (rail 0)");
    expect(failure).toContain("the management network is not the fabric");
    expect(failure).toContain("sparkform:fabric");
  });

  it("a rail the worker does not share is not the pair's rail", () => {
    expect(
      wireProofFailure({ ...client, iface: "fabric1" }, [worker], { rails, tokens: 48 }),
    ).toMatch(
      /spark-1 fabric1 .*not a rail between spark-1 and spark-2 \(expected fabric0 \(rail 0\)\)/,
    );
  });

  it("the pair's rail with the bytes the smoke's generation moves passes", () => {
    expect(wireProofFailure(client, [worker], { rails, tokens: 48 })).toBeNull();
  });

  it("a byte count the smoke's tokens cannot explain is refused, with the floor", () => {
    const failure = wireProofFailure({ ...client, bytes: 900 }, [{ ...worker, bytes: 900 }], {
      rails,
      tokens: 48,
    });
    expect(failure).toContain("spark-1 fabric0: 900 bytes");
    expect(failure).toContain(`at least ${48 * WIRE_BYTES_PER_TOKEN} bytes`);
  });

  it("without a Fabric stage: any interface passes as before, and the verdict says the rail was not checked", () => {
    const eth = { node: "spark-1", iface: "eth0", bytes: 725_296 };
    expect(wireProofFailure(eth, [{ ...worker, iface: "eth0" }], { tokens: 48 })).toBeNull();
    expect(wireRailNote(undefined)).toMatch(/rails? could not be checked.*sparkform:fabric/);
    expect(wireRailNote(rails)).toBe("");
  });
});

describe("the decode-path verdict from a worker's log (issue 33 item 14)", () => {
  const w = { node: "spark-2", endpoint: "192.168.100.2:50052", port: 50052 };
  const counts = { graphCompute: 4, graphRecompute: 28, recomputeAfterCompute: true };

  it("a shrunk log is 'could not prove', not a pass", () => {
    const v = workerLogFailure(w, {
      ...counts,
      graphCompute: 0,
      graphRecompute: 0,
      recomputeAfterCompute: false,
      shrunk: true,
    });
    expect(v).toMatch(/could not prove the decode fast path/);
    expect(v).toContain("spark-2");
    expect(v).toContain("`up` again");
  });

  it("recompute after compute passes; compute without recompute is the fast path off", () => {
    expect(workerLogFailure(w, { ...counts, shrunk: false })).toBeNull();
    expect(workerLogFailure(w, { ...counts, recomputeAfterCompute: false, shrunk: false })).toMatch(
      /the decode fast path is off/,
    );
  });
});

describe("wireEnds", () => {
  const workers = [{ node: "spark-2" }, { node: "spark-3" }];
  /** One interface's counters, as worker-log.py reports them. */
  const wire = (iface: string, rxBytes: number, txBytes: number) => ({ iface, rxBytes, txBytes });

  it("is each worker's bytes between its counters before and after the smoke", () => {
    expect(
      wireEnds(
        workers,
        [wire("fabric0", 1000, 500), wire("fabric1", 10, 10)],
        [wire("fabric0", 61_000, 3_500), wire("fabric1", 10, 10)],
      ),
    ).toEqual([
      { node: "spark-2", iface: "fabric0", bytes: 63_000 },
      { node: "spark-3", iface: "fabric1", bytes: 0 },
    ]);
  });

  it("an interface that changed in between, or none, proves nothing", () => {
    expect(
      wireEnds(
        workers,
        [wire("fabric0", 0, 0), wire("", 0, 0)],
        [wire("fabric1", 9_000, 9_000), wire("", 0, 0)],
      ),
    ).toEqual([
      { node: "spark-2", iface: "fabric1", bytes: 0 },
      { node: "spark-3", iface: "", bytes: 0 },
    ]);
  });
});
