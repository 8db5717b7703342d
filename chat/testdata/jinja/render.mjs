// Renders every chat template of ../templates.json with every conversation of
// ../conversations.json using @huggingface/jinja (tools, when a conversation has them, as
// the variable tools), and prints one JSON array of
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
        messages: c.messages.map((m) => templateMessage(m, t.template)),
        ...(c.tools ? { tools: c.tools } : {}),
        add_generation_prompt: c.add_generation_prompt,
        bos_token: t.bos_token,
        eos_token: t.eos_token,
        date_string: "26 Jul 2024",
        ...(c.vars ?? {}),
      });
      out.push({ template: t.name, conversation: c.name, output });
    } catch (err) {
      out.push({ template: t.name, conversation: c.name, error: String(err) });
    }
  }
}
const expressions = JSON.parse(readFileSync(new URL("../expressions.json", import.meta.url), "utf8"));
for (const x of expressions.expressions) {
  try {
    out.push({ template: "expressions", conversation: x.name, output: new Template(x.template).render(expressions.context) });
  } catch (err) {
    out.push({ template: "expressions", conversation: x.name, error: String(err) });
  }
}
process.stdout.write(JSON.stringify(out));

// templateMessage is a message of OpenAI's chat API as loom passes it to a template (see
// messageForm in ../../chat.go): no content as "" unless the template tests content for none,
// a tool call's arguments decoded to an object unless the template adds them to a string.
function templateMessage(m, template) {
  const noneContent = /(\.content|\[['"]content['"]\])\s+is\s+(not\s+)?none/.test(template);
  const textArguments = /arguments['"]?\]?\s*\+/.test(template);
  const out = { role: m.role, content: m.content ?? (noneContent ? null : "") };
  if (m.tool_calls) {
    out.tool_calls = m.tool_calls.map((c) => ({
      ...(c.id ? { id: c.id } : {}),
      type: "function",
      function: { name: c.function.name, arguments: textArguments ? c.function.arguments : JSON.parse(c.function.arguments) },
    }));
  }
  if (m.reasoning_content) out.reasoning_content = m.reasoning_content;
  if (m.tool_call_id) out.tool_call_id = m.tool_call_id;
  if (m.name) out.name = m.name;
  return out;
}
