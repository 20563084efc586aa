import { defineConfig } from "vitest/config";

// One project per tier, by what its tests need (the README's layout table); the tiers run one
// after another (groupOrder). The tiers above component drive real hosts and the real pulumi CLI
// and share machine-wide resources (network namespaces, the file backend, the simulated pair), so
// their files run one at a time, each in a process of its own. Vitest 3.2 has file parallelism
// for the whole run only (no per-project setting), so it stays off here and `npm run test:pure`
// turns it on for unit and component, which are pure (temp dirs of their own, no fixed port, no
// root).
const ROOT_SETUP = "test/setup/require-root.ts";

export default defineConfig({
  test: {
    setupFiles: ["test/setup/ts-require.ts"],
    fileParallelism: false,
    // A tier's slowest test (a pulumi up on the simulated pair) bounds them all.
    testTimeout: 600_000,
    hookTimeout: 900_000,
    reporters: ["verbose"],
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "component",
          include: ["test/component/**/*.test.ts"],
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: ["test/integration/**/*.test.ts"],
          sequence: { groupOrder: 1 },
        },
      },
      {
        extends: true,
        test: {
          name: "e2e",
          include: ["test/e2e/**/*.test.ts"],
          setupFiles: [ROOT_SETUP],
          sequence: { groupOrder: 2 },
        },
      },
      {
        extends: true,
        test: {
          name: "acceptance",
          include: ["test/acceptance/**/*.test.ts"],
          setupFiles: [ROOT_SETUP],
          sequence: { groupOrder: 3 },
        },
      },
    ],
  },
});
