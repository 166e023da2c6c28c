// Build a TypeScript answer as tsx and ts-node --transpile-only do: its types stripped, never
// checked, and only a syntax error refused (deepgym.languages' "ts", run by judge.build in the
// answer's build sandbox: `node ts_transpile.js main.ts` writes main.js beside it).
//
// TypeScript's own compiler is Debian's (node-typescript): found through the `tsc` on PATH,
// whose real path is <package>/bin/tsc. Exit 0: main.js is written; 1: the source has syntax
// errors (each on stderr, as tsc prints them); 2: this script could not run (no TypeScript).
"use strict";
const fs = require("fs");
const path = require("path");

function loadTypeScript() {
  for (const dir of (process.env.PATH || "/usr/bin:/bin").split(":")) {
    const tsc = path.join(dir, "tsc");
    if (fs.existsSync(tsc)) {
      return require(path.join(path.dirname(fs.realpathSync(tsc)), "..", "lib", "typescript.js"));
    }
  }
  throw new Error("no tsc on PATH");
}

let ts;
try {
  ts = loadTypeScript();
} catch (e) {
  process.stderr.write(`ts_transpile: cannot load TypeScript: ${e.message}\n`);
  process.exit(2);
}
const source = process.argv[2];
const text = fs.readFileSync(source, "utf8");
const out = ts.transpileModule(text, {
  fileName: source,
  reportDiagnostics: true,
  compilerOptions: { target: ts.ScriptTarget.ES2020, module: ts.ModuleKind.CommonJS },
});
const errors = (out.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
for (const d of errors) {
  const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : null;
  const at = where ? `(${where.line + 1},${where.character + 1})` : "";
  const said = ts.flattenDiagnosticMessageText(d.messageText, "\n");
  process.stderr.write(`${source}${at}: error TS${d.code}: ${said}\n`);
}
if (errors.length) {
  process.exit(1);
}
fs.writeFileSync(source.replace(/\.ts$/, ".js"), out.outputText);
