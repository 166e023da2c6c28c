"use strict";

// Wrong: a Number holds integers exactly only up to 2^53.
const words = require("fs").readFileSync(0, "utf8").split(/\s+/).filter((w) => w.length > 0);
const n = words.length > 0 ? Number(words[0]) : 0;
const out = [];
for (let i = 0; i < n; i++) {
  out.push(String(Number(words[1 + 2 * i]) + Number(words[2 + 2 * i])));
}
process.stdout.write(out.length > 0 ? out.join("\n") + "\n" : "");
