// The comparison behind every provider's diff.
import { describe, expect, it } from "vitest";
import { changedKeys } from "../../components/providers/diff";

describe("changedKeys", () => {
  const olds = {
    a: "x",
    b: { host: "h", port: 22 },
    c: [1, 2],
    d: undefined as string | undefined,
    out: 1,
  };

  it.each([
    [{ a: "x", b: { host: "h", port: 22 }, c: [1, 2], d: undefined }, []],
    [{ a: "y", b: { host: "h", port: 22 }, c: [1, 2], d: undefined }, ["a"]],
    [{ a: "x", b: { host: "h", port: 2222 }, c: [2, 1], d: undefined }, ["b", "c"]],
    [{ a: "x", b: { host: "h", port: 22 }, c: [1, 2], d: "set" }, ["d"]],
  ])("%j → %j", (news, want) => {
    expect(changedKeys(olds, news, ["a", "b", "c", "d"] as const)).toEqual(want);
  });

  it("returns keys in the order asked, and only those asked", () => {
    const news = { a: "y", b: { host: "g", port: 22 }, c: [1, 2], d: undefined };
    expect(changedKeys(olds, news, ["b", "a"] as const)).toEqual(["b", "a"]);
    expect(changedKeys(olds, news, ["c"] as const)).toEqual([]);
  });

  it("treats a key absent from state like an undefined one (state from an older provider)", () => {
    const old: { a: string; extra?: string[] } = { a: "x" };
    expect(changedKeys(old, { a: "x", extra: undefined }, ["a", "extra"] as const)).toEqual([]);
    expect(changedKeys(old, { a: "x", extra: [] }, ["a", "extra"] as const)).toEqual(["extra"]);
  });
});
