// @ts-check
import eslint from "@eslint/js";
import tseslint from "typescript-eslint";

const outOfTest = {
  group: ["**/test/*", "**/test"],
  message: "Only test/ imports from test/: shared harness code lives in sim/world/.",
};

const folderEntries = {
  group: ["**/transport/*", "**/peer-copy/*"],
  message:
    "Import the folder's entry (components/transport, components/peer-copy), not its modules.",
};

export default tseslint.config(
  { ignores: ["node_modules/**", "policies/node_modules/**", ".sparkform/**", "bin/**"] },
  eslint.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_" },
      ],
    },
  },
  {
    // The transport and node-to-node copy each have one entry (their index.ts): their modules can
    // then be split or renamed without touching callers. Tests of a transport module may reach it.
    files: ["**/*.ts"],
    ignores: [
      "components/transport/**",
      "test/unit/transport-*.test.ts",
      "test/unit/quote.test.ts",
      "test/unit/node-connection.test.ts",
      "test/integration/transport*.test.ts",
      // The policy pack loads nothing that runs commands: it takes the transport's pure names
      // module, not its entry (test/unit/import-layers.test.ts holds it to that).
      "policies/node.ts",
    ],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [folderEntries],
        },
      ],
    },
  },
  {
    // The transport is the bottom layer: it reaches nothing of sparkform's above it (node
    // built-ins and npm packages only), so nothing it imports can import it back.
    files: ["components/transport/**/*.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["../*"],
              message: "components/transport/ imports nothing from outside its folder.",
            },
          ],
        },
      ],
    },
  },
  {
    // Tests may import product code, never the reverse: the benches and everything else stand
    // the simulated world up from sim/world/, so test/ can be reorganised without breaking them.
    // (Flat config replaces a rule's options per file: the folder-entry rule is repeated here.)
    files: ["**/*.ts"],
    ignores: ["test/**", "components/transport/**"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [folderEntries, outOfTest],
        },
      ],
    },
  },
  {
    // The policy pack's one exception to the folder-entry rule (above) keeps the test/ rule.
    files: ["policies/node.ts"],
    rules: { "no-restricted-imports": ["error", { patterns: [outOfTest] }] },
  },
);
