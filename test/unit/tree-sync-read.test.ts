// TreeSync's refresh (`read`): what it records as the expected digest. A node copy that now
// equals the control node's tree (`sparkform sync` put it there) is recorded as expected, so the
// next refresh and preview agree; a copy changed on the node stays drift; an edit on the
// control node alone is preview's business, not refresh's. The node's digest comes from the
// same script run over a directory standing in for the node's copy.
import { appendFileSync, cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { localTreeDigest, TREE_DIGEST_PROGRAM } from "../../components/tree/digest";
import { read, TREE_SOURCE_ENV, type TreeSyncOutputs } from "../../components/tree/provider";
import { nativeProgram } from "../../components/native-script";

let nodeCopy = "";
const runs: string[][] = [];
vi.mock("../../components/transport", async (importOriginal) => ({
  ...(await importOriginal<typeof import("../../components/transport")>()),
  openNode: () => ({
    target: { name: "spark-2" },
    run: async (call: { args: string[] }) => {
      runs.push(call.args);
      const d = localTreeDigest(nodeCopy, []);
      return { stdout: `${JSON.stringify(d)}\n`, stderr: "", exitCode: 0 };
    },
  }),
}));

let work = "";
let source = "";

function state(expectedDigest: string, digest: string): TreeSyncOutputs {
  const p = nativeProgram(TREE_DIGEST_PROGRAM);
  return {
    kind: "TreeSync",
    providerVersion: "test",
    target: { name: "spark-2", host: "10.0.0.2", port: 22, user: "spark", hostKey: "k" },
    source,
    dest: "~/src/tree",
    exclude: [],
    expectedDigest,
    digestProgram: { name: p.name, sha256: p.sha256 },
    digest,
    files: 1,
    bytes: 1,
  } as TreeSyncOutputs;
}

describe("TreeSync read", () => {
  beforeEach(() => {
    work = mkdtempSync(path.join(tmpdir(), "tree-read-"));
    source = path.join(work, "source");
    nodeCopy = path.join(work, "node");
    mkdirSync(source);
    writeFileSync(path.join(source, "a.c"), "int main(void) { return 0; }\n");
    cpSync(source, nodeCopy, { recursive: true });
    runs.length = 0;
  });
  afterEach(() => rmSync(work, { recursive: true, force: true }));

  it("records the control node's tree as expected when the node's copy now equals it (a sync)", async () => {
    const before = localTreeDigest(source, []).digest;
    appendFileSync(path.join(source, "a.c"), "// edited\n");
    cpSync(source, nodeCopy, { recursive: true });
    const after = localTreeDigest(source, []).digest;
    const r = await read("id", state(before, before));
    expect([r.props?.digest, r.props?.expectedDigest]).toEqual([after, after]);
    // The recorded inputs move too (the engine diffs a refreshed resource against them), and
    // carry no measurement.
    expect(r.inputs?.expectedDigest).toBe(after);
    expect(Object.keys(r.inputs ?? {})).not.toContain("digest");
    // The node computes it with its own file-hash cache, outside the tree.
    expect(runs[0]).toContain("--cache");
  });

  it("keeps the old expectation when the node's copy changed and the control's did not", async () => {
    const d = localTreeDigest(source, []).digest;
    appendFileSync(path.join(nodeCopy, "a.c"), "// tampered on the node\n");
    const r = await read("id", state(d, d));
    expect(r.props?.expectedDigest).toBe(d);
    expect(r.props?.digest).not.toBe(d);
    expect(r.inputs).toBeUndefined();
  });

  it("changes nothing when only the control node's tree was edited (preview's business)", async () => {
    const d = localTreeDigest(source, []).digest;
    appendFileSync(path.join(source, "a.c"), "// edited, not synced\n");
    const r = await read("id", state(d, d));
    expect([r.props?.digest, r.props?.expectedDigest]).toEqual([d, d]);
  });

  it("keeps the old expectation when the control node has no such tree (another operator's machine)", async () => {
    const d = localTreeDigest(source, []).digest;
    appendFileSync(path.join(nodeCopy, "a.c"), "// changed\n");
    rmSync(source, { recursive: true });
    const r = await read("id", state(d, d));
    expect(r.props?.expectedDigest).toBe(d);
  });

  it("records a sync from another checkout: the tree sparkform sync names, not the recorded path", async () => {
    const before = localTreeDigest(source, []).digest;
    // Checkout B's tree, edited and pushed; the state still names checkout A's path.
    const checkoutB = path.join(work, "checkout-b");
    cpSync(source, checkoutB, { recursive: true });
    appendFileSync(path.join(checkoutB, "a.c"), "// edited in checkout B\n");
    cpSync(checkoutB, nodeCopy, { recursive: true });
    const after = localTreeDigest(checkoutB, []).digest;
    expect((await read("id", state(before, before))).props?.expectedDigest).toBe(before);
    vi.stubEnv(TREE_SOURCE_ENV, checkoutB);
    try {
      const r = await read("id", state(before, before));
      expect([r.props?.digest, r.props?.expectedDigest]).toEqual([after, after]);
      expect(r.inputs?.source).toBe(source);
    } finally {
      vi.unstubAllEnvs();
    }
  });
});

describe("TreeSync diff", () => {
  it("another checkout's path to the same tree is no change; another tree is", async () => {
    const { provider } = await import("../../components/tree/provider");
    const olds = state("d1", "d1");
    const { digest: _d, files: _f, bytes: _b, ...inputs } = olds;
    const elsewhere = { ...inputs, source: "/home/bob/sparkform/.sparkform/llama.cpp" };
    expect((await provider.diff!("id", olds, elsewhere as never)).changes).toBe(false);
    expect(
      (await provider.diff!("id", olds, { ...elsewhere, expectedDigest: "d2" } as never)).changes,
    ).toBe(true);
  });
});
