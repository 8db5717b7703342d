// Drives a loom server with the official openai npm package and prints what it got as one JSON
// object; server/node_test.go checks it. Usage: node client.mjs BASE_URL THINKING_GGUF, the
// second the file of a model served as "qwen3" whose chat template thinks.
import OpenAI from "openai";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: "unused", maxRetries: 0 });
const out = {};

const completion = { model: "default", prompt: "And God said", max_tokens: 20, seed: 7, temperature: 1.2 };
const c = await client.completions.create(completion);
out.completion = { text: c.choices[0].text, usage: c.usage, finish: c.choices[0].finish_reason };

let text = "";
let usage = null;
const stream = await client.completions.create({ ...completion, stream: true, stream_options: { include_usage: true } });
for await (const chunk of stream) {
  for (const choice of chunk.choices) text += choice.text;
  if (chunk.usage) usage = chunk.usage;
}
out.stream = { text, usage };

const chat = { model: "default", messages: [{ role: "system", content: "Speak plainly." }, { role: "user", content: "Tell me of the sea." }], seed: 3, max_tokens: 20 };
const r = await client.chat.completions.create(chat);
out.chat = { text: r.choices[0].message.content, role: r.choices[0].message.role, finish: r.choices[0].finish_reason };

text = "";
for await (const chunk of await client.chat.completions.create({ ...chat, stream: true })) {
  for (const choice of chunk.choices) text += choice.delta.content ?? "";
}
out.chatStream = { text };

const n = await client.completions.create({ model: "creative", prompt: "In the beginning", n: 3, seed: 11, max_tokens: 16 });
out.n = n.choices.map((ch) => ch.text);

const lp = await client.chat.completions.create({ model: "greedy", messages: [{ role: "user", content: "Who made light?" }], max_completion_tokens: 8, logprobs: true, top_logprobs: 2 });
out.logprobs = lp.choices[0].logprobs.content.map((e) => ({ token: e.token, logprob: e.logprob, top: e.top_logprobs.length }));
out.logprobsUsage = lp.usage;

const lpReq = { model: "creative", messages: [{ role: "user", content: "Who made light?" }], max_completion_tokens: 12, seed: 4, n: 2, logprobs: true, top_logprobs: 2 };
const lpWhole = await client.chat.completions.create(lpReq);
const lpStreamed = lpWhole.choices.map(() => ({ text: "", content: [] }));
for await (const chunk of await client.chat.completions.create({ ...lpReq, stream: true })) {
  for (const choice of chunk.choices) {
    lpStreamed[choice.index].text += choice.delta.content ?? "";
    lpStreamed[choice.index].content.push(...(choice.logprobs?.content ?? []));
  }
}
out.logprobsStream = { whole: lpWhole.choices.map((ch) => ({ text: ch.message.content, content: ch.logprobs.content })), streamed: lpStreamed };

const scored = await client.completions.create({ model: "greedy", prompt: "And God saw the light", max_tokens: 0, echo: true, logprobs: 1 });
out.echo = { text: scored.choices[0].text, tokens: scored.choices[0].logprobs.tokens, logprobs: scored.choices[0].logprobs.token_logprobs };

// Tools: the SDK's tool runner calls the function the server's reply names, with the
// arguments it parsed, and sends the result back; the SDK's stream helper puts the streamed
// call together.
const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 20 }, unit: { enum: ["C", "F"] } }, required: ["city", "unit"], additionalProperties: false },
    parse: JSON.parse,
    function: (args) => {
      out.tools.ran.push(args);
      return `rain in ${args.city}, 4 ${args.unit}`;
    },
  },
};
out.tools = { ran: [] };
const runner = client.chat.completions.runTools({
  model: "creative", seed: 5, max_tokens: 120, parallel_tool_calls: false,
  messages: [{ role: "user", content: "Weather in Oslo?" }],
  tools: [weatherTool],
  tool_choice: { type: "function", function: { name: "get_weather" } },
});
await runner.done();
out.tools.messages = runner.messages;
const answer = await client.chat.completions.create({ model: "creative", seed: 5, max_tokens: 8, messages: runner.messages, tools: [{ type: "function", function: { name: "get_weather", parameters: weatherTool.function.parameters } }] });
out.tools.answer = { finish: answer.choices[0].finish_reason, prompt_tokens: answer.usage.prompt_tokens };
const toolStream = client.chat.completions.stream({
  model: "creative", seed: 5, max_tokens: 120, parallel_tool_calls: false,
  messages: [{ role: "user", content: "Weather in Oslo?" }],
  tools: [{ type: "function", function: { name: "get_weather", parameters: weatherTool.function.parameters } }],
  tool_choice: "required",
});
const final = await toolStream.finalChatCompletion();
out.tools.streamed = { finish: final.choices[0].finish_reason, calls: final.choices[0].message.tool_calls.map((c) => c.function) };

// A reasoning model's reply, scripted by a regex in an inline pipeline: its thinking comes
// as reasoning_content, whole and streamed.
const pipeline = `[model]\npath = ${JSON.stringify(process.argv[3])}\n[strategy]\ntype = "greedy"\n[[processors]]\ntype = "regex"\npattern = '''<think>\\nThe sea is wide\\.\\n</think>\\n\\nIt is wide\\.'''\n`;
const thinking = { model: "qwen3", messages: [{ role: "user", content: "Tell me of the sea." }], max_tokens: 60, pipeline };
const thought = await client.chat.completions.create(thinking);
let reasoning = "";
text = "";
for await (const chunk of await client.chat.completions.create({ ...thinking, stream: true })) {
  for (const choice of chunk.choices) {
    reasoning += choice.delta.reasoning_content ?? "";
    text += choice.delta.content ?? "";
  }
}
out.reasoning = {
  whole: { reasoning: thought.choices[0].message.reasoning_content, content: thought.choices[0].message.content, tokens: thought.usage.completion_tokens_details.reasoning_tokens },
  streamed: { reasoning, content: text },
};

out.retrieved = await client.models.retrieve("greedy");

out.errors = {};
for (const [name, req] of Object.entries({
  unknownModel: { model: "nope", prompt: "x" },
  badTemperature: { model: "default", prompt: "x", temperature: 5 },
})) {
  try {
    await client.completions.create(req);
    out.errors[name] = { status: 0 };
  } catch (e) {
    out.errors[name] = { status: e.status, type: e.type, param: e.param, code: e.code, message: e.message };
  }
}

console.log(JSON.stringify(out));
