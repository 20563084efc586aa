// Each kind's upgrade of older recorded outputs (components/<stage>/state-upgrade.ts) for the
// SparkNode, FabricLink, Toolchain, TreeSync, NativeBuild and ModelReplica kinds: old shapes as
// older sparkform wrote them come out current, the current shape comes back as it is, and the
// provider (what the engine calls) diffs old-shape state as before.
import { describe, expect, it } from "vitest";
import { nativeProgram, programRef } from "../../components/native-script";

const target = { name: "spark-1", host: "h", port: 22, user: "spark", hostKey: "ssh-ed25519 AAAA" };
const facts = programRef("node/facts.sh");
const digest = programRef("tree/tree-digest.py");
const verify = programRef("build/verify-build.sh");
const textOf = (ref: { name: string }) => nativeProgram(ref.name).text;

describe("SparkNode", () => {
  const news = {
    kind: "SparkNode" as const,
    providerVersion: "1",
    target,
    factsProgram: facts,
    diskPaths: ["~"],
  };
  const { factsProgram: _f, ...rest } = news;
  // Before ProgramRefs: facts.sh's whole text, no ref.
  const old = { ...rest, factsScript: textOf(facts), facts: {} } as never;

  it("upgrades facts.sh's recorded text to its ref; the current shape comes back as it is", async () => {
    const { upgrade } = await import("../../components/node/state-upgrade");
    const current = { ...news, facts: {} } as never;
    expect(upgrade(old)).toMatchObject({ factsProgram: facts });
    expect(upgrade(current)).toBe(current);
    expect(upgrade(upgrade(old))).toEqual(upgrade(old));
  });
  it("the provider diffs old state as before: no change for the same text, on up and refresh", async () => {
    const { provider } = await import("../../components/node/provider");
    expect(await provider.diff("id", old, news)).toEqual({ changes: false, replaces: [] });
    expect((await provider.diff("id", old, old)).changes).toBe(false);
    const edited = { ...rest, factsScript: "#!/bin/sh\n", facts: {} } as never;
    expect((await provider.diff("id", edited, news)).changes).toBe(true);
  });
});

describe("TreeSync", () => {
  const news = {
    kind: "TreeSync" as const,
    providerVersion: "1",
    target,
    source: "/src",
    dest: "~/src/t",
    exclude: [],
    expectedDigest: "d",
    digestProgram: digest,
  };
  const { digestProgram: _d, ...rest } = news;
  const old = { ...rest, digestScript: textOf(digest), digest: "d", files: 1, bytes: 1 } as never;

  it("upgrades tree-digest.py's recorded text to its ref; the current shape comes back as it is", async () => {
    const { upgrade } = await import("../../components/tree/state-upgrade");
    const current = { ...news, digest: "d", files: 1, bytes: 1 };
    expect(upgrade(old)).toMatchObject({ digestProgram: digest });
    expect(upgrade(current)).toBe(current);
    expect(upgrade(upgrade(old))).toEqual(upgrade(old));
  });
  it("the provider diffs old state as before", async () => {
    const { provider } = await import("../../components/tree/provider");
    expect((await provider.diff("id", old, news)).changes).toBe(false);
    expect((await provider.diff("id", old, old)).changes).toBe(false);
    const edited = { ...rest, digestScript: "print()\n", digest: "d", files: 1, bytes: 1 };
    expect((await provider.diff("id", edited as never, news)).changes).toBe(true);
  });
});

describe("Toolchain", () => {
  const news = {
    kind: "Toolchain" as const,
    providerVersion: "1",
    target,
    path: "~/.asdf",
    binDirs: ["bin"],
    probe: ["elixir", "--version"],
    expect: "Elixir",
    digestProgram: digest,
  };
  const { digestProgram: _d, ...rest } = news;
  const measured = { digest: "d", files: 1, bytes: 1, probeOutput: "", copiedBy: "present" };
  const old = { ...rest, digestScript: textOf(digest), ...measured } as never;

  it("upgrades tree-digest.py's recorded text to its ref; the current shape comes back as it is", async () => {
    const { upgrade } = await import("../../components/toolchain/state-upgrade");
    const current = { ...news, ...measured } as never;
    expect(upgrade(old)).toMatchObject({ digestProgram: digest });
    expect(upgrade(current)).toBe(current);
    expect(upgrade(upgrade(old))).toEqual(upgrade(old));
  });
  it("the provider diffs old state as before", async () => {
    const { provider } = await import("../../components/toolchain/provider");
    expect((await provider.diff("id", old, news)).changes).toBe(false);
    expect((await provider.diff("id", old, old)).changes).toBe(false);
  });
});

describe("NativeBuild", () => {
  const news = {
    kind: "NativeBuild" as const,
    providerVersion: "1",
    target,
    tree: "~/src/llama.cpp",
    treeDigest: "t",
    flags: {},
    targets: ["llama-server"],
    artifactPaths: ["bin/llama-server"],
    jobs: 0,
    verifyProgram: verify,
  };
  const { verifyProgram: _v, ...rest } = news;
  const built = { installed: { "bin/llama-server": "a" }, artifacts: { "bin/llama-server": "a" } };
  const old = { ...rest, verifyScript: textOf(verify), ...built } as never;

  it("upgrades verify-build.sh's recorded text to its ref; the current shape comes back as it is", async () => {
    const { upgrade } = await import("../../components/build/state-upgrade");
    const current = { ...news, ...built } as never;
    expect(upgrade(old)).toMatchObject({ verifyProgram: verify });
    expect(upgrade(current)).toBe(current);
    expect(upgrade(upgrade(old))).toEqual(upgrade(old));
  });
  it("the provider diffs old state as before: the same verifier text is no rebuild", async () => {
    const { provider } = await import("../../components/build/provider");
    expect(await provider.diff("id", old, news as never)).toEqual({ changes: false, replaces: [] });
    expect((await provider.diff("id", old, old)).changes).toBe(false);
  });
});

describe("ModelReplica", () => {
  const file = { path: "m.gguf", size: 3, sha256: "s", url: "https://hub/m.gguf" };
  const news = {
    kind: "ModelReplica" as const,
    providerVersion: "1",
    target,
    repo: "org/m",
    commit: "c",
    modelsDir: "~/models",
    dir: "~/models/org/m/c",
    files: [file],
    verify: "fast" as const,
    retries: 1,
    scriptDigest: "x",
    reserveBytes: 0,
  };
  const present = {
    path: "m.gguf",
    present: true,
    size: 3,
    mtimeNs: "1",
    sha256: "s",
    partBytes: 0,
  };
  // Older state: neither the files this resource put in place nor the files as measured.
  const old = { ...news, fetchedBy: "hub" } as never;

  it("fills the missing lists; the current shape comes back as it is", async () => {
    const { upgrade } = await import("../../components/model/state-upgrade");
    const current = { ...news, fetchedBy: "hub", created: ["m.gguf"], nodeFiles: [present] };
    expect(upgrade(old)).toMatchObject({ created: [], nodeFiles: [] });
    expect(upgrade(current as never)).toBe(current);
    expect(upgrade(upgrade(old))).toEqual(upgrade(old));
  });
  it("the provider diffs old state as before: files never measured are drift", async () => {
    const { provider } = await import("../../components/model/provider");
    expect(await provider.diff("id", old, news)).toEqual({
      changes: true,
      replaces: [],
      deleteBeforeReplace: false,
    });
    const measured = { ...news, fetchedBy: "hub", created: [], nodeFiles: [present] } as never;
    expect((await provider.diff("id", measured, news)).changes).toBe(false);
  });
});

describe("FabricLink", () => {
  it("state from before probe.refreshSeconds stays as it is, and a refresh of it is no change", async () => {
    const { upgrade } = await import("../../components/fabric/state-upgrade");
    const { provider } = await import("../../components/fabric/provider");
    const old = {
      kind: "FabricLink",
      providerVersion: "1",
      link: "spark-1↔spark-2",
      rail: 0,
      probe: { count: 1000, seconds: 2 },
      healthy: true,
    } as never;
    expect(upgrade(old)).toBe(old);
    expect((await provider.diff("id", old, old)).changes).toBe(false);
  });
});
