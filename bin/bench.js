// `npm run bench`'s entry. execa (ESM) is loaded by Node itself before tsx's CommonJS hook is
// registered: under the hook, its dependency unicorn-magic (exports without a "require"
// condition) fails to resolve. The benches are TypeScript, compiled on load by tsx.
require("execa");
require("tsx/cjs");
require("../bench/run.ts");
