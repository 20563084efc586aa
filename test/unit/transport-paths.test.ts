// The one `~/` mapping every provider uses, and the refusal in front of every `rm -rf`.
import { describe, expect, it } from "vitest";
import { deletableOperand, homeRelative } from "../../components/transport/paths";

describe("homeRelative", () => {
  it.each([
    ["~", "."],
    ["~/", "."],
    ["~//", "."],
    ["~/x", "x"],
    ["~//x", "x"],
    ["~/x/", "x/"],
    ["~/src/llama.cpp", "src/llama.cpp"],
    ["~/.cache/ccache", ".cache/ccache"],
    ["/abs", "/abs"],
    ["/abs/dir/", "/abs/dir/"],
    ["rel/x", "rel/x"],
    [".cache/sparkform", ".cache/sparkform"],
  ])("%j → %j", (p, want) => {
    expect(homeRelative(p)).toBe(want);
  });

  it("refuses another user's home", () => {
    expect(() => homeRelative("~bob/x")).toThrow(
      `path "~bob/x" names another user's home; give it as ~/… or an absolute path`,
    );
  });
});

describe("deletableOperand", () => {
  const tree = { node: "spark-1", minHomeDepth: 2 };
  const toolchain = { node: "spark-1", minHomeDepth: 1 };

  it.each([
    ["~/src/llama.cpp", tree, "src/llama.cpp"],
    ["/srv/trees/llama", tree, "/srv/trees/llama"],
    ["~/.asdf", toolchain, ".asdf"],
    ["/opt/asdf", toolchain, "/opt/asdf"],
  ])("%j with %j → %j", (p, opts, want) => {
    expect(deletableOperand(p, opts)).toBe(want);
  });

  it.each([
    ["~", tree, "too close to $HOME"],
    ["~/", tree, "too close to $HOME"],
    ["~/src", tree, "too close to $HOME"],
    ["~/./src", tree, "too close to $HOME"],
    ["~", toolchain, "too close to $HOME"],
    ["~/.", toolchain, "too close to $HOME"],
    ["/", tree, "too close to /"],
    ["/home", toolchain, "too close to /"],
    ["~/a/../..", tree, 'it contains ".."'],
    ["/srv/../etc/x", tree, 'it contains ".."'],
  ])("refuses %j", (p, opts, why) => {
    expect(() => deletableOperand(p, opts)).toThrow(`[spark-1] refusing to delete ${p}: ${why}`);
  });
});
