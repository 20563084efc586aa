// `sparkform sim` refuses bad arguments before it touches the cluster (no root, no sim needed).
import { describe, expect, it } from "vitest";
import { run } from "../../cli/commands/sim";

describe("sparkform sim: bad arguments", () => {
  it.each([
    [
      ["rate", "spark-1", "fast"],
      "rate needs <node> <Mbit/s>|line, like `rate spark-1 100 --rail 0`",
    ],
    [["rate", "spark-1", "100", "--rail", "one"], "--rail takes a rail number (0 or 1)"],
    [
      ["link", "spark-1", "spark-2", "down", "--rail", "1.5"],
      "--rail takes a rail number (0 or 1)",
    ],
    [["link", "spark-1", "spark-2", "sideways"], "link needs <a> <b> up|down"],
  ])("%j: %s", async (argv, message) => {
    await expect(run(argv)).rejects.toThrow(message);
  });
});
