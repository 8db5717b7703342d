// Splits texts with the pre-tokenizer expressions of each family using the JavaScript engine's
// own regular expressions (ECMAScript, flags "gu"): the reference that loom's regex engine
// (model/tokenizer/regex.go) is compared with. Input on stdin, JSON:
//   {"families": [{"name": "...", "regexes": ["..."]}], "texts": ["..."]}
// Output on stdout, JSON: {"name": [[piece, ...] for each text], ...}.
// Each expression splits every piece of the one before: a match is a piece, so is the text
// between matches; an empty match only cuts, and the search moves on one code point.
import { readFileSync } from "node:fs";

function split(re, s) {
  const out = [];
  let last = 0;
  re.lastIndex = 0;
  for (;;) {
    const m = re.exec(s);
    if (m === null) break;
    const i = m.index;
    const e = i + m[0].length;
    if (i > last) out.push(s.slice(last, i));
    if (e > i) {
      out.push(s.slice(i, e));
      last = e;
    } else {
      last = i;
      const cp = s.codePointAt(i);
      re.lastIndex = i + (cp !== undefined && cp > 0xffff ? 2 : 1);
      if (re.lastIndex > s.length) break;
    }
  }
  if (last < s.length) out.push(s.slice(last));
  return out;
}

const input = JSON.parse(readFileSync(0, "utf8"));
const result = {};
for (const fam of input.families) {
  const res = fam.regexes.map((src) => new RegExp(src, "gu"));
  result[fam.name] = input.texts.map((text) => {
    let pieces = text === "" ? [] : [text];
    for (const re of res) pieces = pieces.flatMap((p) => split(re, p));
    return pieces;
  });
}
process.stdout.write(JSON.stringify(result));
