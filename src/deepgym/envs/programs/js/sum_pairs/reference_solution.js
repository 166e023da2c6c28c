"use strict";

const words = require("fs").readFileSync(0, "utf8").split(/\s+/).filter((w) => w.length > 0);
const n = words.length > 0 ? Number(words[0]) : 0;
const out = [];
for (let i = 0; i < n; i++) {
  // BigInt: a Number loses integers past 2^53.
  out.push((BigInt(words[1 + 2 * i]) + BigInt(words[2 + 2 * i])).toString());
}
process.stdout.write(out.length > 0 ? out.join("\n") + "\n" : "");
