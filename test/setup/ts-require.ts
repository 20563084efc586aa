// Every test file runs with node's require able to load the project's TypeScript, as every
// process sparkform starts has it: the bundled CLI resolves its on-demand requires
// (cli/stack.ts loads the config schema with a plain require, only on a read through pulumi),
// the program and the policy pack register components/ts/require.js. Tests import CLI modules
// in vitest's own process, where node's require knows no `.ts`: without this, the first read of
// a stack's config through pulumi fails with "Cannot find module '../components/config'" (the
// doctor e2e did, on a clean clone where no cached read hid it).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- CommonJS loader
(require("../../components/ts/require") as { register(): void }).register();
