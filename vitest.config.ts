import { defineConfig } from "vitest/config";

// Integration tests drive real hosts and the real pulumi CLI: they are slow and share
// machine-wide resources (network namespaces, the file backend), so files run one at a time.
export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    setupFiles: ["test/setup/ts-require.ts"],
    testTimeout: 600_000,
    hookTimeout: 900_000,
    fileParallelism: false,
    reporters: ["verbose"],
  },
});
