// Renders every chat template of ../templates.json with every conversation of
// ../conversations.json using @huggingface/jinja, and prints one JSON array of
// {template, conversation, output} or {template, conversation, error}.
//
//   node render.mjs
import { Template } from "@huggingface/jinja";
import { readFileSync } from "node:fs";

const templates = JSON.parse(readFileSync(new URL("../templates.json", import.meta.url), "utf8"));
const conversations = JSON.parse(readFileSync(new URL("../conversations.json", import.meta.url), "utf8"));
const out = [];
for (const t of templates) {
  let tpl;
  try {
    tpl = new Template(t.template);
  } catch (err) {
    for (const c of conversations) out.push({ template: t.name, conversation: c.name, error: String(err) });
    continue;
  }
  for (const c of conversations) {
    try {
      const output = tpl.render({
        messages: c.messages,
        add_generation_prompt: c.add_generation_prompt,
        bos_token: t.bos_token,
        eos_token: t.eos_token,
        date_string: "26 Jul 2024",
      });
      out.push({ template: t.name, conversation: c.name, output });
    } catch (err) {
      out.push({ template: t.name, conversation: c.name, error: String(err) });
    }
  }
}
process.stdout.write(JSON.stringify(out));
