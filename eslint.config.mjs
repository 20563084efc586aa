// @ts-check
import eslint from "@eslint/js";
import tseslint from "typescript-eslint";

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
          patterns: [
            {
              group: ["**/transport/*", "**/peer-copy/*"],
              message:
                "Import the folder's entry (components/transport, components/peer-copy), not its modules.",
            },
          ],
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
);
