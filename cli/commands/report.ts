// `sparkform report fabric [--stack S]`: the fabric report from a stack's state — markdown and a
// topology picture (SVG, and a PNG beside it rendered with resvg) — from the FabricLink
// resources `pulumi stack export` holds (so it does not depend on what the program exports).
import * as fs from "node:fs";
import * as path from "node:path";
import { parseArgs } from "node:util";
import { renderMarkdown, renderSvg, type ReportLink } from "../../components/fabric/report";
import { repoRoot } from "../../setup/pulumi/env";
import { readState, resourcesOf, type StackState } from "../../stack-state";
import { out, UsageError } from "../errors";
import { readExport } from "../stack";

export const usage = `usage: sparkform report fabric [--stack S] [--from EXPORT.json] [--out DIR]
  --stack S     the stack to read (default: local); runs \`pulumi stack export\`
  --from FILE   read a saved \`pulumi stack export\` instead
  --out DIR     where fabric.md, fabric.svg and fabric.png go (default .sparkform/reports/fabric-<stack>)`;

export const FABRIC_LINK_TYPE = "pulumi-nodejs:dynamic/sparkform:FabricLink";

/** The FabricLink outputs in a stack's state (one recorded before its first measure has no ports). */
export function fabricLinksOf(state: StackState): ReportLink[] {
  return resourcesOf(state, "FabricLink")
    .filter((r) => r.outputs.ports)
    .map((r) => r.outputs as ReportLink);
}

/** The PNG of an SVG, rendered with resvg (prebuilt binaries from the npm registry). */
export async function svgToPng(svg: string, width = 1400): Promise<Buffer> {
  const { Resvg } = await import("@resvg/resvg-js");
  const r = new Resvg(svg, {
    fitTo: { mode: "width", value: width },
    background: "#ffffff",
    font: { loadSystemFonts: true, defaultFontFamily: "DejaVu Sans" },
  });
  return Buffer.from(r.render().asPng());
}

export async function run(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: { stack: { type: "string" }, from: { type: "string" }, out: { type: "string" } },
  });
  const [what, ...extra] = positionals;
  if (what !== "fabric" || extra.length > 0) throw new UsageError("the report is `report fabric`");
  const stack = values.stack ?? "local";
  const exported = values.from
    ? readState(fs.readFileSync(values.from, "utf8"), values.from)
    : readExport(stack);
  const links = fabricLinksOf(exported);
  const dir = path.resolve(
    values.out ?? path.join(repoRoot, ".sparkform", "reports", `fabric-${stack}`),
  );
  fs.mkdirSync(dir, { recursive: true });
  const svg = renderSvg(links, `sparkform fabric: stack ${stack}`);
  fs.writeFileSync(path.join(dir, "fabric.svg"), svg);
  fs.writeFileSync(path.join(dir, "fabric.png"), await svgToPng(svg));
  fs.writeFileSync(
    path.join(dir, "fabric.md"),
    renderMarkdown(links, { stack, picture: "fabric.png" }),
  );
  out(`${links.length} links and rails: ${path.join(dir, "fabric.md")} (+ fabric.svg, fabric.png)`);
  return 0;
}
