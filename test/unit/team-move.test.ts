// cli/team/move.ts's check that what arrived is what left, and the URL it shows.
import { describe, expect, it } from "vitest";
import { exportDifferences, shownUrl } from "../../cli/team/move";

const U = (name: string) => `urn:pulumi:local::sparkform::sparkform:test:T::${name}`;
const exported = (resources: object[]) => JSON.stringify({ version: 3, deployment: { resources } });
const a = {
  urn: U("a"),
  type: "sparkform:test:T",
  outputs: { x: 1 },
  created: "2026-12-01",
  modified: "2026-12-01",
};
const b = { urn: U("b"), type: "sparkform:test:T", outputs: { secret: "s3" } };

describe("exportDifferences", () => {
  it("none when the resources match, whatever their timestamps", () => {
    expect(
      exportDifferences(exported([a, b]), exported([{ ...a, modified: "2026-12-07" }, b])),
    ).toEqual([]);
  });
  it("names a resource missing, one changed and one that was not there", () => {
    expect(
      exportDifferences(
        exported([a, b]),
        exported([
          { ...b, outputs: { secret: "other" } },
          { urn: U("c"), type: "sparkform:test:T" },
        ]),
      ),
    ).toEqual([`${U("a")} is missing`, `${U("b")} differs`, `${U("c")} was not there before`]);
  });
  it("refuses an export that holds a resource twice", () => {
    expect(() => exportDifferences(exported([a, a]), exported([a]))).toThrow(/::a twice/);
  });
});

describe("shownUrl", () => {
  it("drops a password from a postgres URL and leaves others", () => {
    expect(shownUrl("postgres://u:pw@db:5432/s?sslmode=require")).toBe(
      "postgres://u@db:5432/s?sslmode=require",
    );
    expect(shownUrl("file:///x")).toBe("file:///x");
  });
});
