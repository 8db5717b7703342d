// Drives the loom workbench page in Chromium with playwright-core and prints, as one JSON
// object, what the page showed; cmd/loom/workbench_test.go checks it against `loom run`.
//
//   node workbench.mjs URL CHROMIUM ARTIFACTS_DIR < cases.json
//
// cases.json gives the pipelines and prompts to use (see workbenchCases in the Go test).
import { chromium } from "playwright-core";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";

const [url, executablePath, artifacts] = process.argv.slice(2);
const cases = JSON.parse(readFileSync(0, "utf8"));
const report = { console: [] };

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync"],
});
const context = await browser.newContext({ viewport: { width: 1440, height: 1000 }, acceptDownloads: true });
const page = await context.newPage();
page.on("console", (m) => { if (m.type() === "error") report.console.push(m.text()); });
page.on("pageerror", (e) => report.console.push(String(e)));
const shot = (name) => page.screenshot({ path: join(artifacts, name), fullPage: true });

// setEditor replaces editor side's text the way typing does (an input event per change).
async function setEditor(side, text) {
  const area = page.locator(`#toml-${side}`);
  await area.fill(text);
}

// waitStatus waits until editor side's status matches re; on a timeout the error says what
// the status and the listed problems were.
async function waitStatus(side, re) {
  try {
    await page.waitForFunction(([s, src]) => new RegExp(src).test(document.querySelector(`#status-${s}`).textContent), [side, re.source], { timeout: 60000 });
  } catch (err) {
    const seen = await page.evaluate((s) => ({
      status: document.querySelector(`#status-${s}`).textContent,
      issues: [...document.querySelectorAll(`#issues-${s} li`)].map((li) => li.textContent),
    }), side).catch((e) => String(e));
    throw new Error(`editor ${side}: waiting for status ${re}: ${err.message}; the page shows ${JSON.stringify(seen)}`);
  }
}

// runAndWait clicks Run (or presses Ctrl+Enter) and waits until every view has its result,
// sampling the number of rendered tokens of view A while it streams.
async function runAndWait({ keyboard = false } = {}) {
  await page.evaluate(() => {
    window.__counts = [];
    const tick = () => {
      const n = document.querySelectorAll("#run-A .tok").length;
      window.__counts.push(n);
      if (!window.__stop) requestAnimationFrame(tick);
    };
    window.__stop = false;
    requestAnimationFrame(tick);
  });
  if (keyboard) {
    await page.locator("#prompt").focus();
    await page.keyboard.press("Control+Enter");
  } else {
    await page.click("#run");
  }
  await page.waitForFunction(() => !document.querySelector("#run").disabled && !/running/.test(document.querySelector("#run-A").textContent));
  return page.evaluate(() => { window.__stop = true; return window.__counts; });
}

async function pick(name) {
  await page.selectOption("#picker", name);
  await waitStatus("A", /^valid$/);
}

async function setRunFields({ prompt, seed, maxTokens, trace }) {
  await page.fill("#prompt", prompt);
  await page.fill("#seed", String(seed));
  await page.fill("#max-tokens", String(maxTokens));
  await page.fill("#trace", String(trace));
}

// readStep clicks a token and reads the step panel.
async function readStep(side, seq, step) {
  await page.click(`#run-${side} .tok[data-seq="${seq}"][data-step="${step}"]`);
  return page.evaluate(() => {
    const p = document.querySelector("#step");
    const field = (f) => p.querySelector(`[data-field="${f}"]`).textContent;
    return {
      chosen: field("chosen"), logprob: field("logprob"), score: field("score"),
      stages: [...p.querySelectorAll(".stage")].map((s) => ({
        processor: s.dataset.processor,
        kept: Number(s.querySelector("[data-kept]").dataset.kept),
        top: [...s.querySelectorAll(".bar")].map((b) => ({ id: Number(b.dataset.id), value: Number(b.dataset.value), chosen: b.classList.contains("chosen") })),
      })),
    };
  });
}

try {
  await page.goto(url, { waitUntil: "load" });
  await page.waitForSelector("#picker option", { state: "attached" });
  await waitStatus("A", /^valid$/);
  report.pipelines = await page.$$eval("#picker option", (os) => os.map((o) => o.value));
  report.parts = await page.$$eval("#parts-list details.part", (ds) => ds.map((d) => d.dataset.type));
  await page.click("#parts-toggle");
  await page.locator('#parts-list details.part[data-type="top_p"] summary').click();
  report.topPParams = await page.$$eval('#parts-list details.part[data-type="top_p"] tr', (rs) => rs.map((r) => r.textContent));
  await shot("01-parts.png");
  await page.keyboard.press("Escape");

  // An error at its line, then fixed.
  await setEditor("A", cases.bad);
  await page.waitForSelector("#issues-A li");
  await waitStatus("A", /error/);
  report.errors = await page.$$eval("#issues-A li", (ls) => ls.map((l) => ({ line: Number(l.dataset.line), text: l.textContent })));
  report.gutterErrors = await page.$$eval("#gutter-A span.err", (ss) => ss.map((s) => Number(s.textContent)));
  await shot("02-error.png");
  await setEditor("A", cases.fixed);
  await waitStatus("A", /^valid$/);
  report.fixedStatus = await page.textContent("#status-A");

  // A sampling run (two samples), streamed, then one step's story.
  await pick(cases.sample.pipeline);
  await setRunFields(cases.sample);
  const sampleStart = Date.now();
  const counts = await runAndWait({ keyboard: true });
  report.sample = {
    ms: Date.now() - sampleStart,
    frames: counts.length,
    distinctCounts: new Set(counts).size,
    rows: await page.$$eval("#run-A .tokens", (ts) => ts.map((t) => t.querySelectorAll(".tok").length)),
    text: await page.$$eval("#run-A .tokens", (ts) => ts.map((t) => [...t.querySelectorAll(".tok")].map((s) => s.textContent).join(""))),
    prompt: await page.$$eval("#run-A .ptok", (ps) => ps.map((p) => ({ text: p.textContent, logprob: p.dataset.logprob ?? "", title: p.title, coloured: p.style.background !== "" }))),
  };
  report.sample.step = await readStep("A", cases.sample.seq, cases.sample.step);
  // The keyboard: → moves to the next token and shows its step.
  await page.keyboard.press("ArrowRight");
  report.sample.afterArrow = await page.evaluate(() => document.activeElement.dataset.step + "/" + document.querySelector("#step h3").textContent);
  await shot("03-step.png");
  for (const mode of ["entropy", "rank"]) {
    await page.selectOption("#colour", mode);
    report.sample[mode] = await page.$eval('#run-A .tok[data-step="0"]', (t) => t.title);
  }
  await page.selectOption("#colour", "prob");

  // Export the run, then open the exported file.
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#export")]);
  const exported = join(artifacts, "exported-run.json");
  await download.saveAs(exported);
  report.exported = JSON.parse(readFileSync(exported, "utf8"));
  await page.setInputFiles("#open", exported);
  await page.waitForFunction(() => /opened/.test(document.querySelector("#run-A h3").textContent));
  report.reopened = await page.$$eval("#run-A .tokens", (ts) => ts.map((t) => t.querySelectorAll(".tok").length));
  report.reopenedPrompt = await page.$$eval("#run-A .ptok", (ps) => ps.map((p) => p.textContent));

  // Beam search: the tree.
  await pick(cases.beam.pipeline);
  await setRunFields(cases.beam);
  await runAndWait();
  report.beam = await page.evaluate(() => ({
    rows: [...document.querySelectorAll("#run-A .tokens")].map((t) => [...t.querySelectorAll(".tok")].map((s) => s.textContent).join("")),
    kept: document.querySelectorAll("#run-A .tree g.kept").length,
    pruned: document.querySelectorAll("#run-A .tree g.pruned").length,
    title: document.querySelector("#run-A .tree h4")?.textContent,
  }));
  await shot("04-beam.png");

  // Speculative decoding: accepted and rejected drafts.
  await pick(cases.speculative.pipeline);
  await setRunFields(cases.speculative);
  await runAndWait();
  report.speculative = await page.evaluate(() => ({
    acceptance: Number(document.querySelector("#run-A [data-acceptance]")?.dataset.acceptance),
    accepted: document.querySelectorAll("#run-A .tok.accepted").length,
    corrected: document.querySelectorAll("#run-A .tok.corrected").length,
    rejected: document.querySelectorAll("#run-A .rejected").length - 1, // minus the legend
    text: [...document.querySelectorAll("#run-A .tok")].map((s) => s.textContent).join(""),
  }));
  await shot("05-speculative.png");

  // Compare two settings of one pipeline.
  await page.check("#compare");
  await setEditor("A", cases.compare.a);
  await setEditor("B", cases.compare.b);
  await waitStatus("A", /^valid$/);
  await waitStatus("B", /^valid$/);
  await setRunFields(cases.compare);
  await runAndWait();
  report.compare = await page.evaluate(() => ({
    diverge: Number(document.querySelector("#diff").dataset.diverge),
    banner: document.querySelector("#diff").textContent,
    marked: [...document.querySelectorAll(".tok.diverge")].map((t) => t.dataset.step),
  }));
  await shot("06-compare.png");
  await page.uncheck("#compare");

  // Responsiveness: 200 tokens, 6 processors, a trace of 10.
  await setEditor("A", cases.heavy.pipeline);
  await waitStatus("A", /^valid$/);
  await setRunFields(cases.heavy);
  await page.evaluate(() => {
    window.__long = [];
    new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__long.push(e.duration); }).observe({ type: "longtask", buffered: false });
  });
  const t0 = Date.now();
  const heavyCounts = await runAndWait();
  report.heavy = {
    ms: Date.now() - t0,
    tokens: await page.$$eval("#run-A .tok", (t) => t.length),
    distinctCounts: new Set(heavyCounts).size,
    frames: heavyCounts.length,
    longTasks: await page.evaluate(() => window.__long),
  };
  await shot("07-heavy.png");

  // A pipeline whose processor is a plugin.
  await pick(cases.plugin.pipeline);
  await setRunFields(cases.plugin);
  await runAndWait();
  report.plugin = { step: await readStep("A", cases.plugin.seq, cases.plugin.step) };
  await shot("08-plugin.png");
} catch (err) {
  report.failure = String(err.stack || err);
  await shot("failure.png").catch(() => {});
} finally {
  await browser.close();
}
process.stdout.write(JSON.stringify(report));
