// tests/browser/run.mjs -- normd's teaching page in a real browser.
//
// Starts build/normd on an ephemeral port, opens the page served at GET /
// in Debian's chromium (driven by playwright-core; no browser is ever
// downloaded), and drives each of the seven lessons with clicks, keys and
// form inputs. After every change it takes the request the page sent (the
// page logs them in window.normdApiLog), sends the same request from Node,
// and checks that every number the page shows is the API's answer. It also
// loads the page from another origin (?api=...), and alone there (it loads
// normd.js from the daemon), opens examples/embed.html from that origin and
// checks its chart against the API, checks that the browser console stays
// free of errors, and saves screenshots.
//
// Usage: node tests/browser/run.mjs   (from anywhere; exit status 0 = pass)
// Environment: NORMD_BIN (default build/normd), CHROMIUM (default
// /usr/bin/chromium), SCREENSHOTS (default build/screenshots), ONLY (run
// the tests whose name contains this text).
// Prints one line per test and closes with "browser: N passed, N failed".

import {spawn} from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import {fileURLToPath} from "node:url";

import {chromium} from "playwright-core";

import normdJs from "../../web/normd.js";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "../..");
const NORMD_BIN = path.resolve(REPO, process.env.NORMD_BIN || "build/normd");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const SHOTS = path.resolve(REPO, process.env.SCREENSHOTS || "build/screenshots");
const STARTUP_MS = 10000;
const TEST_MS = 180000;
const SETTLE_MS = 450; // longer than the page's longest debounce (250 ms)

// ---------------------------------------------------------------- helpers

class Check extends Error {}
function check(cond, msg) {
  if (!cond) throw new Check(msg);
}
function eq(got, want, msg) {
  check(Object.is(got, want) || got === want, `${msg}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

const withTimeout = (promise, ms, what) => {
  let timer;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what}: timed out after ${ms} ms`)), ms); }),
  ]);
};

// Shown numbers against the API's, each [cell, want, what]: the same value
// (the exact number is in the cell's data-value attribute), and the text
// the page's own formatter (web/index.html fmt, as window.normdFmt) makes
// of that value, asked of the page in one call for the whole list. The API
// writes non-finite numbers as "NaN", "Infinity", "-Infinity", which
// Number() reads as such.
async function sameNumbers(page, list) {
  const values = list.map(([cell, want, what]) => {
    check(cell, `${what}: not shown`);
    const w = Number(want);
    const got = Number(cell.value);
    check(Object.is(got, w) || (Number.isNaN(got) && Number.isNaN(w)), `${what}: page shows ${cell.value}, API says ${want}`);
    return w;
  });
  const texts = await page.evaluate((ws) => ws.map((w) => window.normdFmt(w)), values);
  list.forEach(([cell, , what], i) => eq(cell.text, texts[i], `${what}: text`));
}

// ------------------------------------------------------------- processes

const children = [];
process.on("exit", () => { for (const c of children) try { c.kill("SIGKILL"); } catch (e) { /* gone */ } });

function startNormd() {
  return new Promise((resolve, reject) => {
    if (!fs.existsSync(NORMD_BIN)) return reject(new Error(`${NORMD_BIN} does not exist: make build/normd`));
    const proc = spawn(NORMD_BIN, ["--port", "0", "--host", "127.0.0.1", "--config", "config/normd.json"],
      {cwd: REPO, stdio: ["ignore", "ignore", "pipe"]});
    children.push(proc);
    let buf = "";
    const timer = setTimeout(() => reject(new Error(`normd did not start within ${STARTUP_MS} ms:\n${buf}`)), STARTUP_MS);
    proc.stderr.on("data", (d) => {
      buf += d.toString();
      const m = buf.match(/listening on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve({proc, port: Number(m[1])}); }
      if (buf.length > 1 << 20) buf = buf.slice(-4096);
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`normd exited (${code}):\n${buf}`)); });
  });
}

// Another origin, to check that pages work there (CORS): a static host of
// web/ (the page and normd.js beside it), the page alone under /alone/
// (no normd.js there: it loads the daemon's), and examples/embed.html.
function startStatic() {
  const files = {
    "/": ["web/index.html", "text/html; charset=utf-8"],
    "/index.html": ["web/index.html", "text/html; charset=utf-8"],
    "/normd.js": ["web/normd.js", "text/javascript; charset=utf-8"],
    "/alone/": ["web/index.html", "text/html; charset=utf-8"],
    "/embed.html": ["examples/embed.html", "text/html; charset=utf-8"],
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    const file = files[url.pathname];
    if (file) {
      res.writeHead(200, {"Content-Type": file[1]});
      res.end(fs.readFileSync(path.join(REPO, file[0])));
    } else {
      res.writeHead(404);
      res.end();
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({server, port: server.address().port})));
}

let BASE = "";
async function apiPost(p, body) {
  const res = await fetch(BASE + p, {method: "POST", headers: {"Content-Type": "application/json"}, body});
  const doc = await res.json();
  return {status: res.status, doc};
}

// ------------------------------------------------------------- page helpers

const consoleErrors = [];
let allowed = []; // regexes of console errors a test expects right now

function watch(page) {
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    const text = m.text();
    if (allowed.some((re) => re.test(text))) return;
    consoleErrors.push(`${page.url()}: ${text}`);
  });
  page.on("pageerror", (e) => consoleErrors.push(`${page.url()}: uncaught ${e.message}`));
}

async function expectingConsoleErrors(patterns, fn) {
  allowed = patterns;
  try { return await fn(); } finally { allowed = []; }
}

// Waits until a lesson's numbers are current: not busy, and its revision
// unchanged for SETTLE_MS (so a debounced run still to come is not missed).
async function settle(page, id) {
  const deadline = Date.now() + 60000; // lesson 7 sends 26 simulations
  let last = null;
  for (;;) {
    const st = await page.$eval(`#${id}`, (p) => ({busy: p.getAttribute("aria-busy"), rev: p.dataset.rev}));
    if (st.busy === "false" && Number(st.rev) > 0 && last && st.rev === last.rev) return Number(st.rev);
    check(Date.now() < deadline, `#${id} did not settle (busy ${st.busy}, rev ${st.rev})`);
    last = st;
    await page.waitForTimeout(SETTLE_MS);
  }
}

// The page's API calls, oldest first.
const apiLog = (page) => page.evaluate(() => window.normdApiLog.map((e) => ({
  method: e.method, path: e.path, base: e.base, body: e.body, status: e.status})));

async function lastCall(page, p, filter = () => true) {
  const log = (await apiLog(page)).filter((e) => e.path === p && filter(e));
  check(log.length > 0, `the page made no call to ${p}`);
  return log[log.length - 1];
}

// Numbers in a container: [{value, text}] in document order.
const numbersIn = (page, sel) => page.$$eval(`${sel} [data-value]`, (els) =>
  els.map((e) => ({value: e.getAttribute("data-value"), text: e.textContent})));

// A table's body rows as arrays of {value, text} (value null for labels).
const tableRows = (page, sel) => page.$$eval(`${sel} tbody tr`, (rows) => rows.map((r) =>
  Array.from(r.children).map((c) => ({value: c.getAttribute("data-value"), text: c.textContent}))));

async function shot(page, name, opts = {}) {
  fs.mkdirSync(SHOTS, {recursive: true});
  const file = path.join(SHOTS, name);
  // the sticky lesson bar would cover the top of a tall element's shot
  if (opts.selector) await page.locator(opts.selector).screenshot({path: file, style: "nav.lessons { position: static !important; }"});
  else {
    await page.evaluate(() => window.scrollTo(0, 0));
    await page.screenshot({path: file, fullPage: true});
  }
  screenshots.push(name);
}
const screenshots = [];

async function openView(page, id) {
  await page.click(`#tab-${id}`);
  check(await page.isVisible(`#${id}`), `#${id} is not shown after clicking its tab`);
  await settle(page, id);
}

// ------------------------------------------------------------------ tests

const tests = [];
const test = (name, fn) => tests.push({name, fn});

test("the page loads, connects to normd and shows seven lessons", async ({page, port}) => {
  const scripts = [];
  page.on("request", (r) => { if (r.resourceType() === "script") scripts.push(r.url()); });
  await page.goto(`${BASE}/`);
  await page.waitForSelector("#api-status.ok", {timeout: 10000});
  // its requests go through normd.js, the client the daemon serves
  eq(scripts.join(" "), `${BASE}/normd.js`, "the page's one script file");
  eq(await page.evaluate(() => typeof window.normd.client), "function", "normd.js's global");
  const info = await (await fetch(`${BASE}/v1/info`)).json();
  const status = await page.textContent("#api-status");
  check(status.includes(info.version), `status "${status}" lacks version ${info.version}`);
  eq(await page.inputValue("#api-base"), `http://127.0.0.1:${port}`, "API base defaults to the page's origin");
  eq((await page.$$("[role=tab]")).length, 7, "tabs");
  eq((await page.$$("section.lesson > h2")).length, 7, "lesson headings");
  eq(await page.getAttribute("#tab-axes", "aria-selected"), "true", "first lesson selected");
  await settle(page, "axes");
});

test("tabs work with the keyboard and the next buttons", async ({page}) => {
  await page.goto(`${BASE}/#axes`);
  await settle(page, "axes");
  await page.focus("#tab-axes");
  await page.keyboard.press("ArrowRight");
  eq(await page.getAttribute("#tab-try", "aria-selected"), "true", "ArrowRight selects lesson 2");
  check(await page.isVisible("#try") && !(await page.isVisible("#axes")), "lesson 2 shown alone");
  check(await page.evaluate(() => document.activeElement.id === "tab-try"), "focus follows the tab");
  await page.keyboard.press("End");
  eq(await page.getAttribute("#tab-depth", "aria-selected"), "true", "End selects lesson 7");
  await page.keyboard.press("ArrowRight");
  eq(await page.getAttribute("#tab-axes", "aria-selected"), "true", "ArrowRight wraps to lesson 1");
  await page.click("#axes [data-goto=try]");
  eq(await page.getAttribute("#tab-try", "aria-selected"), "true", "the next button opens lesson 2");
  check(page.url().endsWith("#try"), `the URL names the lesson: ${page.url()}`);
  await settle(page, "try");
});

// The statistics index of cell (n, c, p) of the (4, 6, 5) tensor of lesson 1.
function axesGroup(norm, groups, n, c) {
  const C = 6;
  switch (norm) {
  case "batch": return c;
  case "layer": return n;
  case "instance": return n * C + c;
  default: return n * groups + Math.floor(c / (C / groups));
  }
}

async function checkAxes(page, norm, groups) {
  await settle(page, "axes");
  const call = await lastCall(page, `/v1/norm/${norm}`);
  const body = JSON.parse(call.body);
  if (norm === "group") eq(body.num_groups, groups, "num_groups sent");
  const {status, doc} = await apiPost(call.path, call.body);
  eq(status, 200, "API status");
  // every cell's group, as the page drew it, against the layout
  const cells = await page.$$eval("#axes-slices rect.cell", (els) => els.map((e) => ({
    cell: e.dataset.cell.split(",").map(Number), group: Number(e.dataset.group), sel: e.classList.contains("sel")})));
  eq(cells.length, 4 * 6 * 5, "cells drawn");
  for (const {cell: [n, c], group} of cells)
    eq(group, axesGroup(norm, groups, n, c), `${norm} cell (${n}, ${c}) group`);
  const picked = (await page.getAttribute("#axes-slices rect.cell.picked", "data-cell")).split(",").map(Number);
  const g = axesGroup(norm, groups, picked[0], picked[1]);
  const size = {batch: 20, layer: 30, instance: 5, group: (6 / groups) * 5}[norm];
  eq(cells.filter((x) => x.sel).length, size, `${norm}: highlighted cells`);
  check(cells.filter((x) => x.sel).every((x) => x.group === g), "highlighted cells are the picked cell's group");
  check((await page.$$("#axes-cube polygon.sel")).length > 0, "the cube shows the group");
  const shown = await numbersIn(page, "#axes-stats");
  eq(shown[1].value, String(g), "selected group");
  await sameNumbers(page, [[shown[2], doc.stats.mean[g], `${norm} group ${g} mean`],
    [shown[3], doc.stats.var[g], `${norm} group ${g} variance`]]);
  eq(doc.stats.mean.length, {batch: 6, layer: 4, instance: 24, group: 4 * groups}[norm], "groups in the API answer");
}

test("1. Which axes? highlights the cells that share statistics", async ({page}) => {
  await page.goto(`${BASE}/#axes`);
  await checkAxes(page, "batch", 2);
  for (const norm of ["layer", "instance", "group"]) {
    await page.check(`#axes-norm input[value=${norm}]`);
    await checkAxes(page, norm, 2);
  }
  await page.selectOption("#axes-groups", "3");
  await checkAxes(page, "group", 3);
  // pick another cell, in the slices and then in the cube
  await page.click('#axes-slices rect[data-cell="2,4,3"]');
  eq(await page.getAttribute("#axes-slices rect.cell.picked", "data-cell"), "2,4,3", "picked cell");
  await checkAxes(page, "group", 3);
  await shot(page, "01-axes-group-norm.png");
  await page.check("#axes-norm input[value=batch]");
  await page.click('#axes-cube polygon[data-cell="0,5,2"]');
  await checkAxes(page, "batch", 3);
  check((await page.textContent("#axes-explain")).startsWith("Batch norm"), "explanation follows the norm");
  eq(await page.inputValue("#axes-c"), "5", "the cell's channel follows the click");
  // or from the keyboard, with the cell selects
  await page.check("#axes-norm input[value=instance]");
  await settle(page, "axes");
  await page.selectOption("#axes-n", "3");
  await page.selectOption("#axes-c", "2");
  eq(await page.getAttribute("#axes-slices rect.cell.picked", "data-cell"), "3,2,2", "cell picked with the selects");
  await checkAxes(page, "instance", 3);
  await page.check("#axes-norm input[value=batch]");
  await checkAxes(page, "batch", 3);
  await shot(page, "02-axes-batch-norm.png", {selector: "#axes .card"});
});

// Everything lesson 2 shows, against the API's answer to the same request.
async function checkTry(page, expect = {}) {
  await settle(page, "try");
  check(await page.isHidden("#try .problem"), `lesson 2 shows a problem: ${await page.textContent("#try .problem")}`);
  // the lesson's own call asks for histograms (the textbook table's two do not)
  const log = (await apiLog(page)).filter((e) => e.path.startsWith("/v1/norm/") && JSON.parse(e.body).return.includes("histograms"));
  check(log.length > 0, "lesson 2 made no call");
  const last = log[log.length - 1];
  const norm = last.path.split("/").pop();
  if (expect.norm) eq(norm, expect.norm, "route");
  const body = JSON.parse(last.body);
  const {status, doc} = await apiPost(last.path, last.body);
  eq(status, 200, "API status");
  // histograms: one bar per bin, heights are the API's counts
  for (const which of ["input", "output"]) {
    const counts = await page.$$eval(`#try-hist-${which} rect.bar`, (els) => els.map((e) => Number(e.dataset.count)));
    eq(counts.length, doc.histograms.bins, `${which} histogram bins`);
    eq(JSON.stringify(counts), JSON.stringify(doc.histograms[which].counts), `${which} histogram counts`);
  }
  // the per-group table: stats before, output_stats after (for RMS norm
  // ending with the output's rms, the number it brings to 1)
  const rows = await tableRows(page, "#try-table");
  const ng = doc.stats.rstd.length;
  eq(rows.length, Math.min(ng, 64), "table rows");
  const head = await page.$$eval("#try-table thead th", (els) => els.map((e) => e.textContent));
  const hint = await page.textContent("#try-table-hint");
  if (norm === "rms") {
    check(Array.isArray(doc.output_stats.rms), "output_stats has rms for RMS norm");
    eq(head[head.length - 1], "rms after", "last column of the RMS table");
    check(hint.includes("root mean square") && !hint.includes("mean 0 and variance"), `RMS hint: ${hint}`);
    eq(await page.textContent("#try-eps-to"), "mean square", "eps label for RMS norm");
    check((await page.textContent("#try-table-title")).includes("root mean square 1"), "RMS table title");
  } else {
    eq(doc.output_stats.rms, undefined, `no output rms for ${norm} norm`);
    eq(await page.textContent("#try-eps-to"), "variance", `eps label for ${norm} norm`);
  }
  const cells = [];
  rows.forEach((r, g) => {
    const want = norm === "rms"
      ? [doc.stats.rms[g], doc.stats.rstd[g], doc.output_stats.mean[g], doc.output_stats.var[g], doc.output_stats.rms[g]]
      : [doc.stats.mean[g], doc.stats.var[g], doc.stats.rstd[g], doc.output_stats.mean[g], doc.output_stats.var[g]];
    eq(r.length, want.length + 1, "table columns");
    want.forEach((w, k) => cells.push([r[k + 1], w, `${norm} group ${g} column ${k + 1}`]));
  });
  await sameNumbers(page, cells);
  // the steps, in order, with their first values
  const stepNames = await page.$$eval("#try-steps .step", (els) => els.map((e) => e.dataset.step));
  if (doc.steps) {
    eq(stepNames.join(","), doc.steps.map((st) => st.name).join(","), "steps");
    for (let k = 0; k < doc.steps.length; k++) {
      const st = doc.steps[k];
      const shown = await numbersIn(page, `#try-steps .step:nth-of-type(${2 * k + 1})`);
      check(shown.length > 0, `step ${st.name} shows numbers`);
      const cols = st.shape.length ? st.shape[st.shape.length - 1] : 1, showC = Math.min(cols, 10);
      await sameNumbers(page, shown.map((cell, i) => {
        const r = Math.floor(i / showC), c = i % showC;
        return [cell, st.data[r * cols + c], `step ${st.name} [${r}, ${c}]`];
      }));
    }
  } else {
    eq(stepNames.length, 0, "no steps for a large input");
    check((await page.textContent("#try-steps")).includes("max_explain_elements"), "the page says why there are no steps");
  }
  if (doc.running_mean) {
    const rr = await tableRows(page, "#try-running");
    await sameNumbers(page, rr.flatMap((r, c) => [[r[1], doc.running_mean.data[c], `running mean ${c}`],
      [r[2], doc.running_var.data[c], `running var ${c}`]]));
  }
  const curl = await page.textContent("#try-curl");
  check(curl.includes(last.path) && curl.includes(`-d '${last.body.replace(/'/g, "'\\''")}'`), "the request shown is the request sent");
  return {body, doc};
}

test("2. Try it: generated tensors through every norm and option", async ({page}) => {
  await page.goto(`${BASE}/#try`);
  let {body, doc} = await checkTry(page, {norm: "layer"});
  eq(JSON.stringify(body.input.shape), "[8,4,16]", "default shape");
  eq(body.return.includes("steps") && body.return.includes("histograms"), true, "asks for steps and histograms");
  check(doc.output_stats.var.every((v) => Math.abs(v - 1) < 1e-3), "layer norm output has variance 1");
  await shot(page, "03-try-layer-norm.png");

  // group norm with affine, another shape, more bins, separate ranges
  await page.fill("#try-shape", "4, 6, 10");
  await page.dispatchEvent("#try-shape", "change");
  await page.selectOption("#try-norm", "group");
  await page.selectOption("#try-groups", "3");
  await page.check("#try-affine");
  await page.fill("#try-gamma", "3");
  await page.dispatchEvent("#try-gamma", "change");
  await page.fill("#try-beta", "-1");
  await page.dispatchEvent("#try-beta", "change");
  await page.focus("#try-bins");
  for (let i = 0; i < 4; i++) await page.keyboard.press("ArrowRight");
  await page.check("#try-separate");
  ({body, doc} = await checkTry(page, {norm: "group"}));
  eq(JSON.stringify(body.input.shape), "[4,6,10]", "shape sent");
  eq(body.num_groups, 3, "num_groups sent");
  eq(JSON.stringify(body.weight), JSON.stringify({shape: [6], data: [3, 3, 3, 3, 3, 3]}), "weight sent");
  eq(JSON.stringify(body.bias.data), JSON.stringify([-1, -1, -1, -1, -1, -1]), "bias sent");
  eq(body.histogram_bins, 48, "bins sent");
  eq(body.histogram_range, "separate", "range sent");
  eq(doc.stats.shape.join(","), "4,3", "group stats shape");
  check(doc.output_stats.mean.every((m) => Math.abs(m + 1) < 1e-3), "affine output has mean beta");
  await shot(page, "04-try-group-norm-affine.png");
  await page.locator("#try-steps").scrollIntoViewIfNeeded();
  await shot(page, "05-try-steps.png", {selector: "#try-steps"});

  // batch norm, eval mode with running statistics
  await page.selectOption("#try-norm", "batch");
  await page.selectOption("#try-mode", "eval");
  await page.fill("#try-rmean", "1");
  await page.dispatchEvent("#try-rmean", "change");
  await page.fill("#try-rvar", "4");
  await page.dispatchEvent("#try-rvar", "change");
  ({body, doc} = await checkTry(page, {norm: "batch"}));
  eq(body.mode, "eval", "mode sent");
  eq(JSON.stringify(body.running_mean), "[1,1,1,1,1,1]", "running_mean sent");
  eq(JSON.stringify(body.running_var), "[4,4,4,4,4,4]", "running_var sent");
  check(doc.stats.mean.every((m) => m === 1), "eval normalizes with the running mean");

  // batch norm, train mode updating the running statistics
  await page.selectOption("#try-mode", "train");
  await page.check("#try-track");
  await page.fill("#try-momentum", "0.5");
  await page.dispatchEvent("#try-momentum", "change");
  ({body, doc} = await checkTry(page, {norm: "batch"}));
  eq(body.momentum, 0.5, "momentum sent");
  check(body.return.includes("running_stats") && doc.running_mean, "running statistics returned");
  eq((await tableRows(page, "#try-running")).length, 6, "running statistics shown per channel");

  // RMS norm, over the last two dims, weight only
  await page.selectOption("#try-norm", "rms");
  await page.selectOption("#try-axes", "2");
  ({body, doc} = await checkTry(page, {norm: "rms"}));
  eq(JSON.stringify(body.normalized_shape), "[6,10]", "normalized_shape sent");
  eq(body.bias, undefined, "no bias for RMS norm");
  eq(JSON.stringify(body.weight.shape), "[6,10]", "RMS weight shape");
  eq(doc.stats.shape.join(","), "4", "one group per sample");
  check(doc.output_stats.rms.every((r) => Math.abs(r - 3) < 1e-3), `RMS output rms is gamma: ${doc.output_stats.rms}`);
  check((await page.textContent("#try-table-hint")).includes("|γ|"), "the RMS hint names γ");
  // without a weight: rms 1 (just under), while mean and variance are not 0 and 1
  await page.uncheck("#try-affine");
  ({body, doc} = await checkTry(page, {norm: "rms"}));
  eq(body.weight, undefined, "no weight");
  check(doc.output_stats.rms.every((r) => r <= 1 && r > 1 - 1e-3), `RMS output rms just under 1: ${doc.output_stats.rms}`);
  check(doc.output_stats.mean.some((m) => Math.abs(m) > 1e-2), "RMS norm does not center");
  check((await page.textContent("#try-table-hint")).includes("just under 1"), "the RMS hint says rms just under 1");
  await shot(page, "12-try-rms-norm.png", {selector: "#try .card:has(#try-table)"});

  // instance norm, skewed distribution, layer norm with the Annotated
  // Transformer's options
  await page.selectOption("#try-norm", "instance");
  await page.selectOption("#try-dist", "skewed");
  ({body} = await checkTry(page, {norm: "instance"}));
  eq(body.weight, undefined, "no affine");
  await page.selectOption("#try-norm", "layer");
  await page.selectOption("#try-variance", "unbiased");
  await page.selectOption("#try-eps-placement", "outside_sqrt");
  await page.selectOption("#try-axes", "1");
  ({body} = await checkTry(page, {norm: "layer"}));
  eq(body.normalized_shape, undefined, "the last dim is the default");
  eq(body.variance, "unbiased", "variance sent");
  eq(body.eps_placement, "outside_sqrt", "eps_placement sent");
  eq(body.eps, undefined, "default eps left out");

  // past max_explain_elements the page leaves out the steps (no 422)
  await page.fill("#try-shape", "64, 32, 40");
  await page.dispatchEvent("#try-shape", "change");
  ({body} = await checkTry(page, {norm: "layer"}));
  check(!body.return.includes("steps"), "no steps asked for 81920 values");
  eq((await page.textContent("#try-table-more")), "Showing the first 64 of 2048 groups.", "long tables are cut");
});

// The textbook's example and the Annotated Transformer's variant: the
// 4-decimal table against the API's answers to the two requests the page
// sent for it (a row's text is the API's number rounded to 4 decimals).
const fixed4 = (v) => Number(v).toFixed(4).replace("-", "−");

async function checkTextbook(page, variant) {
  const {body, doc} = await checkTry(page, {norm: "layer"});
  eq(JSON.stringify(body.input.shape), "[2,5,100]", "the textbook's shape");
  if (variant === "torch") {
    eq(body.variance, undefined, "biased variance (the default)");
    eq(body.eps, undefined, "eps 1e-5 (the default)");
  } else if (variant === "annotated") {
    eq(body.variance, "unbiased", "unbiased std");
    eq(body.eps_placement, "outside_sqrt", "eps added to the std");
    eq(body.eps, 1e-6, "the Annotated Transformer's eps");
  }
  check(await page.isVisible("#try-textbook"), "the textbook table is shown");
  const calls = (await apiLog(page)).filter((e) => e.path === "/v1/norm/layer" && JSON.parse(e.body).return.join() === "stats,output_stats");
  const [torchCall, atCall] = [calls.filter((e) => JSON.parse(e.body).variance === "biased").pop(), calls.filter((e) => JSON.parse(e.body).variance === "unbiased").pop()];
  for (const c of [torchCall, atCall]) eq(JSON.stringify(JSON.parse(c.body).input), JSON.stringify(body.input), "the same input to both variants");
  const at = JSON.parse(atCall.body);
  eq(`${at.variance} ${at.eps_placement} ${at.eps}`, "unbiased outside_sqrt 0.000001", "the variant's options");
  const torch = (await apiPost(torchCall.path, torchCall.body)).doc, ann = (await apiPost(atCall.path, atCall.body)).doc;
  const rows = await tableRows(page, "#try-textbook-table");
  eq(rows.length, 10, "one row per (batch, token) position");
  rows.forEach((r, g) => {
    const want = [torch.stats.mean[g], torch.stats.var[g], torch.output_stats.mean[g], torch.output_stats.var[g], ann.output_stats.mean[g], ann.output_stats.var[g]];
    want.forEach((w, k) => {
      eq(Number(r[k + 1].value), Number(w), `position ${g} column ${k + 1} value`);
      eq(r[k + 1].text, fixed4(w), `position ${g} column ${k + 1} text`);
    });
    check(["0.0000", "−0.0000"].includes(r[3].text) && r[4].text === "1.0000", `torch after: ${r[3].text}, ${r[4].text}`);
    check(["0.0000", "−0.0000"].includes(r[5].text) && r[6].text === "0.9900", `Annotated after: ${r[5].text}, ${r[6].text}`);
  });
  // torch.stats equals the main answer's when the controls are set to torch
  if (variant === "torch") eq(JSON.stringify(doc.stats.var), JSON.stringify(torch.stats.var), "the table's before is the lesson's");
  const head = await page.$$eval("#try-textbook-table thead th", (els) => els.map((e) => e.textContent));
  eq(head.filter((x) => x.includes("◀")).length, variant === "none" ? 0 : 2, "the set variant's columns marked");
  if (variant !== "none") check(head.find((x) => x.includes("◀")).includes(variant === "torch" ? "torch" : "Annotated"), "the marked variant is the one set");
  const diff = await page.textContent("#try-textbook-diff");
  const ratio = await page.evaluate((v) => window.normdFmt(v), Number(ann.output_stats.var[0]) / Number(torch.output_stats.var[0]));
  check(diff.includes(ratio) && diff.includes("n − 1 = 99"), `the difference is shown: ${diff}`);
}

test("2. Try it: the textbook's example and the Annotated Transformer variant", async ({page}) => {
  await page.goto(`${BASE}/#try`);
  await settle(page, "try");
  check(await page.isHidden("#try-textbook"), "no textbook table for the default input");
  await page.click("#try-preset-torch");
  await checkTextbook(page, "torch");
  await shot(page, "21-try-textbook.png", {selector: "#try-textbook"});
  await page.click("#try-preset-annotated");
  await checkTextbook(page, "annotated");
  await shot(page, "22-try-annotated-transformer.png", {selector: "#try-textbook"});
  await page.selectOption("#try-variance", "biased");
  await checkTextbook(page, "none");
  await page.fill("#try-offset", "1");
  await page.dispatchEvent("#try-offset", "change");
  await settle(page, "try");
  check(await page.isHidden("#try-textbook"), "another input hides the textbook table");
});

test("2. Try it: pasted JSON and the problems the API reports", async ({page}) => {
  await page.goto(`${BASE}/#try`);
  await settle(page, "try");
  await page.check("input[name=try-source][value=paste]");
  await page.fill("#try-json", "[[1, 2, 3, 4], [2, 4, 6, 8], [5, 5, 5, 5]]");
  await page.click("#try-run");
  const {body, doc} = await checkTry(page, {norm: "layer"});
  eq(JSON.stringify(body.input), "[[1,2,3,4],[2,4,6,8],[5,5,5,5]]", "pasted input sent as is");
  eq(doc.output_stats.mean.length, 3, "one row each");
  eq((await page.$$("#try-steps .step")).length, 6, "six steps without affine");

  // not JSON: the page says so and sends nothing
  const before = (await apiLog(page)).length;
  await page.fill("#try-json", "[[1, 2,");
  await page.click("#try-run");
  await settle(page, "try");
  check((await page.textContent("#try .problem")).includes("not valid JSON"), "invalid JSON reported");
  eq((await apiLog(page)).length, before, "nothing sent for invalid JSON");

  // the API's problem details are shown (a 422: the browser logs it)
  await expectingConsoleErrors([/status of 422/], async () => {
    await page.fill("#try-json", '{"shape": [2, 3], "data": [1, 2]}');
    await page.click("#try-run");
    await settle(page, "try");
  });
  const call = await lastCall(page, "/v1/norm/layer");
  const {status, doc: problem} = await apiPost(call.path, call.body);
  eq(status, 422, "API status");
  const text = await page.textContent("#try .problem");
  check(text.includes(problem.code) && text.includes(problem.detail) && text.includes("422"), `problem shown: ${text}`);
  await shot(page, "06-try-problem.png");
});

// A phone: nothing on lesson 2 may be wider than the screen; the ten-column
// step previews scroll inside their card instead.
async function pageWidth(page) {
  return page.evaluate(() => ({doc: document.documentElement.scrollWidth, view: window.innerWidth}));
}

test("2. Try it fits a 390 px wide phone screen", async ({page}) => {
  await page.setViewportSize({width: 390, height: 844});
  await page.goto(`${BASE}/#try`);
  for (const norm of ["layer", "rms", "group"]) {
    if (norm !== "layer") await page.selectOption("#try-norm", norm);
    await checkTry(page, {norm});
    const w = await pageWidth(page);
    eq(w.view, 390, "viewport width");
    eq(w.doc, w.view, `${norm}: document width`);
    const previews = await page.$$eval("#try-steps .step .preview", (els) => els.map((e) =>
      ({overflow: getComputedStyle(e).overflowX, scrolls: e.scrollWidth > e.clientWidth})));
    check(previews.length > 0 && previews.every((p) => p.overflow === "auto"), `${norm}: step previews scroll sideways`);
    check(previews.some((p) => p.scrolls), `${norm}: a ten-column preview is wider than a phone and scrolls`);
  }
  await shot(page, "13-try-phone-390px.png");
});

async function checkLnRms(page) {
  await settle(page, "lnrms");
  const layerCall = await lastCall(page, "/v1/norm/layer");
  const rmsCall = await lastCall(page, "/v1/norm/rms");
  eq(layerCall.body, rmsCall.body, "the same input to both norms");
  const layer = (await apiPost(layerCall.path, layerCall.body)).doc;
  const rms = (await apiPost(rmsCall.path, rmsCall.body)).doc;
  const step = (d, name) => d.steps.find((x) => x.name === name).data[0];
  const rows = await tableRows(page, "#ln-table");
  eq(rows.length, 2, "two rows");
  eq(rows[1][1].text, "nothing", "RMSNorm subtracts nothing");
  await sameNumbers(page, [
    [rows[0][1], step(layer, "mean"), "LayerNorm subtracts"],
    [rows[0][2], step(layer, "std"), "LayerNorm divides by"],
    [rows[0][3], layer.output_stats.mean[0], "LayerNorm output mean"],
    [rows[0][4], layer.output_stats.var[0], "LayerNorm output variance"],
    [rows[1][2], step(rms, "rms"), "RMSNorm divides by"],
    [rows[1][3], rms.output_stats.mean[0], "RMSNorm output mean"],
    [rows[1][4], rms.output_stats.var[0], "RMSNorm output variance"]]);
  for (const [id, d] of [["ln-chart-layer", layer], ["ln-chart-rms", rms]]) {
    const bars = await page.$$eval(`#${id} rect.bar`, (els) => els.map((e) => Number(e.dataset.value)));
    eq(JSON.stringify(bars), JSON.stringify(d.output.data.map(Number)), `${id} bars`);
  }
  return {layer, rms, input: JSON.parse(layerCall.body).input};
}

test("3. LayerNorm vs RMSNorm: the shift slider shows what centering adds", async ({page}) => {
  await page.goto(`${BASE}/#lnrms`);
  let r = await checkLnRms(page);
  eq(r.input.shape.join(","), "1,16", "one vector of 16");
  await page.focus("#ln-shift");
  await page.keyboard.press("End");
  r = await checkLnRms(page);
  eq(await page.textContent("#ln-shift-val"), "6", "shift shown");
  check(r.rms.output_stats.mean[0] > 0.8, `RMSNorm keeps a large shift: mean ${r.rms.output_stats.mean[0]}`);
  check(Math.abs(r.layer.output_stats.mean[0]) < 1e-5, "LayerNorm removes it");
  check((await page.textContent("#ln-explain")).startsWith("The shift dominates"), "explanation for a large shift");
  await shot(page, "07-layernorm-vs-rmsnorm.png");
  await page.keyboard.press("Home");
  r = await checkLnRms(page);
  check(r.rms.output_stats.mean[0] < -0.8, "a negative shift too");
  for (let i = 0; i < 12; i++) await page.keyboard.press("ArrowRight");
  r = await checkLnRms(page);
  eq(await page.textContent("#ln-shift-val"), "0", "no shift");
  check((await page.textContent("#ln-explain")).startsWith("With little shift"), "explanation for no shift");
  await page.selectOption("#ln-d", "32");
  await page.click("#ln-reroll");
  r = await checkLnRms(page);
  eq(r.input.shape.join(","), "1,32", "a longer vector");
});

async function checkBatch(page, size) {
  await settle(page, "batch");
  eq(await page.textContent("#bn-size-val"), String(size), "batch size shown");
  const log = (await apiLog(page)).filter((e) => e.path === "/v1/norm/batch");
  const trains = log.filter((e) => { const b = JSON.parse(e.body); return !b.mode && !b.running_mean; }).slice(-12);
  const evalCall = log.filter((e) => JSON.parse(e.body).mode === "eval").pop();
  const warm = log.filter((e) => JSON.parse(e.body).num_batches_tracked === 19).pop();
  eq(trains.length, 12, "twelve batches");
  const mine = JSON.parse(evalCall.body).input.data;
  for (const t of trains) {
    const b = JSON.parse(t.body);
    eq(b.input.shape.join(","), `${size},3,8`, "batch shape sent");
    eq(JSON.stringify(b.input.data.slice(0, 24)), JSON.stringify(mine), "every batch holds the same sequence");
  }
  const docs = await Promise.all(trains.map((t) => apiPost(t.path, t.body).then((r) => r.doc)));
  const evalDoc = (await apiPost(evalCall.path, evalCall.body)).doc;
  const warmDoc = (await apiPost(warm.path, warm.body)).doc;
  const running = await numbersIn(page, "#bn-running");
  await sameNumbers(page, [[running[0], warmDoc.running_mean.data[0], "running mean"],
    [running[1], warmDoc.running_var.data[0], "running var"]]);
  eq(JSON.stringify(JSON.parse(evalCall.body).running_mean), JSON.stringify(warmDoc.running_mean.data), "eval uses normd's running mean");
  const rows = await tableRows(page, "#bn-table");
  eq(rows.length, 12, "table rows");
  await sameNumbers(page, rows.flatMap((r, k) => [
    [r[1], docs[k].stats.mean[0], `batch ${k + 1} mean`],
    [r[2], docs[k].stats.var[0], `batch ${k + 1} variance`],
    [r[3], docs[k].output.data[0], `batch ${k + 1} train output`],
    [r[4], evalDoc.output.data[0], "eval output"]]));
  const dots = await page.$$eval("#bn-means circle.point", (els) => els.map((e) => Number(e.dataset.value)));
  eq(JSON.stringify(dots), JSON.stringify(docs.map((d) => Number(d.stats.mean[0]))), "dots are the batch means");
  const lines = await page.$$eval("#bn-out polyline.series", (els) => els.length);
  eq(lines, 13, "twelve train lines and the eval line");
  const means = docs.map((d) => d.stats.mean[0]);
  return Math.max(...means) - Math.min(...means);
}

test("4. Why not batch norm? the batch size slider", async ({page}) => {
  await page.goto(`${BASE}/#batch`);
  await checkBatch(page, 4);
  await page.focus("#bn-size");
  await page.keyboard.press("ArrowLeft");
  const spreadSmall = await checkBatch(page, 2);
  await shot(page, "08-batch-norm-size-2.png");
  await page.keyboard.press("End");
  const spreadLarge = await checkBatch(page, 64);
  check(spreadLarge < spreadSmall / 2, `batch means wobble less at 64 (${spreadLarge}) than at 2 (${spreadSmall})`);
  eq(await page.getAttribute("#bn-size", "aria-valuetext"), "64", "the slider speaks the batch size");
  await shot(page, "09-batch-norm-size-64.png");
  await page.click("#bn-reroll");
  await checkBatch(page, 64);
});

async function checkPrePost(page, want) {
  await settle(page, "prepost");
  const call = await lastCall(page, "/v1/residual/simulate");
  const body = JSON.parse(call.body);
  for (const [k, v] of Object.entries(want)) eq(body[k], v, `${k} sent`);
  const {status, doc} = await apiPost(call.path, call.body);
  eq(status, 200, "API status");
  const L = doc.layers;
  const rows = await tableRows(page, "#pp-table");
  eq(rows.length, L + 1, "one row per depth");
  const cols = [["rms", 0], ["rms", 0], ["rel_update", 1], ["rel_update", 1], ["cosine", 1], ["cosine", 1],
    ["cos_to_input", 0], ["cos_to_input", 0]];
  const cells = [];
  rows.forEach((r, t) => {
    eq(r[0].text, String(t), "depth");
    cols.forEach(([key, short], k) => {
      const place = k % 2 === 0 ? "pre" : "post";
      if (short && t === L) eq(r[k + 1].text, "", `${key} has L entries`);
      else cells.push([r[k + 1], doc[place][key][t], `${place} ${key}[${t}]`]);
    });
  });
  await sameNumbers(page, cells);
  for (const [id, key] of [["pp-rms", "rms"], ["pp-rel", "rel_update"], ["pp-cos", "cosine"], ["pp-cos0", "cos_to_input"]]) {
    const counts = await page.$$eval(`#${id} polyline.series`, (els) => els.map((e) => [e.dataset.name, Number(e.dataset.count)]));
    eq(JSON.stringify(counts), JSON.stringify([["Pre-Norm", doc.pre[key].length], ["Post-Norm", doc.post[key].length]]), `${id} curves`);
  }
  return doc;
}

test("5. Pre-Norm vs Post-Norm: both curves from /v1/residual/simulate", async ({page}) => {
  await page.goto(`${BASE}/#prepost`);
  let doc = await checkPrePost(page, {layers: 48, norm: "layer", placement: "both", tokens: 16, d: 64, seed: 1, gain: 1});
  check(doc.pre.rms[48] > 3 * doc.post.rms[48], "Pre-Norm's stream grows, Post-Norm's does not");
  await shot(page, "10-pre-vs-post-norm.png");
  await page.focus("#pp-layers");
  await page.keyboard.press("End");
  await page.selectOption("#pp-norm", "rms");
  await page.focus("#pp-gain");
  await page.keyboard.press("ArrowRight");
  doc = await checkPrePost(page, {layers: 96, norm: "rms", gain: 1.25});
  eq(await page.textContent("#pp-layers-val"), "96", "layers shown");
  await page.fill("#pp-seed", "7");
  await page.dispatchEvent("#pp-seed", "change");
  await page.selectOption("#pp-d", "32");
  await checkPrePost(page, {seed: 7, d: 32, layers: 96});
});

// Lesson 6: every step, rstd, bar and dot product against the API's answer
// to the same request; the dot products recomputed here from that answer.
const dot = (a, b) => a.reduce((acc, v, i) => acc + Number(v) * Number(b[i]), 0);

async function checkBackward(page) {
  await settle(page, "backward");
  check(await page.isHidden("#backward .problem"), "lesson 6 shows a problem");
  const lnCall = await lastCall(page, "/v1/norm/layer/backward");
  const rmsCall = await lastCall(page, "/v1/norm/rms/backward");
  eq(lnCall.body, rmsCall.body, "the same x, dy and weight to both backwards");
  const body = JSON.parse(lnCall.body);
  eq(body.explain, true, "explain asked for");
  const ln = (await apiPost(lnCall.path, lnCall.body)).doc, rms = (await apiPost(rmsCall.path, rmsCall.body)).doc;
  for (const [which, doc] of [["ln", ln], ["rms", rms]]) {
    const names = await page.$$eval(`#bw-${which}-steps .step`, (els) => els.map((e) => e.dataset.step));
    eq(names.join(","), doc.steps.map((st) => st.name).join(","), `${which} steps`);
    const cells = [];
    for (let k = 0; k < doc.steps.length; k++) {
      const shown = await numbersIn(page, `#bw-${which}-steps .step:nth-of-type(${2 * k + 1})`);
      eq(shown.length, doc.steps[k].data.length, `${which} step ${doc.steps[k].name} shows every value`);
      shown.forEach((c, i) => cells.push([c, doc.steps[k].data[i], `${which} ${doc.steps[k].name}[${i}]`]));
    }
    const rstd = await numbersIn(page, `#bw-${which}-rstd`);
    cells.push([rstd[0], doc.stats.rstd[0], `${which} rstd`]);
    await sameNumbers(page, cells);
    const bars = await page.$$eval(`#bw-chart-${which === "ln" ? "layer" : "rms"} rect.bar`, (els) => els.map((e) => Number(e.dataset.value)));
    eq(JSON.stringify(bars), JSON.stringify(doc.grad_input.data.map(Number)), `${which} grad_input bars`);
    eq(JSON.stringify(doc.steps[doc.steps.length - 1].data), JSON.stringify(doc.grad_input.data), `${which}: the last step is grad_input`);
  }
  const rows = await tableRows(page, "#bw-table");
  const want = [ln, rms].map((d) => {
    const gi = d.grad_input.data, xh = d.steps.find((st) => st.name === "xhat").data;
    return [dot(gi, gi.map(() => 1)), dot(gi, xh), Math.sqrt(dot(gi, gi))];
  });
  await sameNumbers(page, rows.flatMap((r, k) => want[k].map((w, j) => [r[j + 1], w, `${k ? "RMSNorm" : "LayerNorm"} column ${j + 1}`])));
  // the claims the lesson makes: LayerNorm's grad_input sums to ~0 and is
  // orthogonal to xhat; RMSNorm's is orthogonal to xhat but does not sum to 0
  check(Math.abs(want[0][0]) < 1e-9 * want[0][2] + 1e-12, `LayerNorm's sum ${want[0][0]}`);
  check(Math.abs(want[0][1]) < 1e-4 * want[0][2], `LayerNorm's dot with xhat ${want[0][1]}`);
  check(Math.abs(want[1][1]) < 1e-4 * want[1][2], `RMSNorm's dot with xhat ${want[1][1]}`);
  const explain = await page.textContent("#bw-explain");
  check(explain.includes(await page.evaluate((v) => window.normdFmt(v), want[1][0])), "the explanation quotes RMSNorm's sum");
  return {body, ln, rms, want};
}

test("6. Backward: the steps, the dot products and your own dx", async ({page}) => {
  await page.goto(`${BASE}/#backward`);
  let {body, ln, want} = await checkBackward(page);
  eq(JSON.stringify(body.input.shape), "[1,8]", "one row of 8");
  eq(body.weight, undefined, "no weight by default");
  check(Math.abs(want[1][0]) > 1e-3, `RMSNorm's grad_input does not sum to 0 here: ${want[1][0]}`);
  await shot(page, "14-backward.png");
  // push one element, with a weight
  await page.check("input[name=bw-mode][value=push]");
  await page.selectOption("#bw-k", "3");
  await page.check("#bw-weight");
  ({body, ln} = await checkBackward(page));
  eq(JSON.stringify(body.grad_output.data), JSON.stringify([0, 0, 0, 1, 0, 0, 0, 0]), "dy pushes element 3");
  eq(body.weight.shape.join(","), "8", "weight sent");
  eq(JSON.stringify(ln.steps[0].data), JSON.stringify(body.weight.data.map((w, i) => (i === 3 ? w : 0))), "g = w * dy");
  eq(await page.textContent("#bw-ln-steps .step .formula"), "g = γ · dy", "the g step names γ");
  // your dx: normd's own answer matches; the classic mistake does not
  await page.fill("#bw-yours", JSON.stringify(ln.grad_input.data));
  await page.click("#bw-compare");
  check((await page.textContent("#bw-verdict")).includes("your backward is right"), "normd's own dx matches");
  let diff = await tableRows(page, "#bw-diff");
  eq(diff.length, 8, "one row per element");
  await sameNumbers(page, diff.flatMap((r, i) => [[r[2], ln.grad_input.data[i], `normd's dx[${i}]`], [r[3], 0, `difference ${i}`]]));
  await page.click("#bw-mistake");
  const mistaken = JSON.parse(await page.inputValue("#bw-yours"));
  const g = ln.steps.find((st) => st.name === "g").data, mg = ln.steps.find((st) => st.name === "mean_g").data[0];
  mistaken.forEach((v, i) => check(Math.abs(v - ln.stats.rstd[0] * (g[i] - mg)) < 1e-12, `mistake[${i}]`));
  const verdict = await page.textContent("#bw-verdict");
  check(verdict.includes("differ") && verdict.includes("x̂ · mean(g · x̂) term is missing"), `the mistake is diagnosed: ${verdict}`);
  check(!verdict.includes("sums to"), "the mistake still sums to 0");
  diff = await tableRows(page, "#bw-diff");
  await sameNumbers(page, diff.map((r, i) => [r[3], mistaken[i] - Number(ln.grad_input.data[i]), `difference ${i}`]));
  await shot(page, "15-backward-your-dx.png", {selector: "#backward .card:has(#bw-yours)"});
  // a new draw, another length
  await page.selectOption("#bw-d", "5");
  await page.click("#bw-reroll");
  ({body} = await checkBackward(page));
  eq(JSON.stringify(body.input.shape), "[1,5]", "one row of 5");
  await page.fill("#bw-yours", "[1, 2]");
  await page.click("#bw-compare");
  check((await page.textContent("#bw-verdict")).includes("JSON list of 5 numbers"), "a wrong length is refused");
});

// Lesson 7: the per-block curves and the sweep against the API's answers.
async function checkDepth(page, want) {
  await settle(page, "depth");
  check(await page.isHidden("#depth .problem"), "lesson 7 shows a problem");
  const log = (await apiLog(page)).filter((e) => e.path === "/v1/residual/simulate");
  const main = log.filter((e) => { const b = JSON.parse(e.body); return b.gradients && b.layers === want.layers && b.seed === want.seed; }).pop();
  check(main, `no call for L = ${want.layers}, seed ${want.seed}`);
  const body = JSON.parse(main.body);
  for (const [k, v] of Object.entries(want)) eq(body[k], v, `${k} sent`);
  eq(JSON.stringify(body.placement), '["pre","post","deepnorm"]', "all three placements");
  const {status, doc} = await apiPost(main.path, main.body);
  eq(status, 200, "API status");
  const L = doc.layers, P = ["pre", "post", "deepnorm"];
  for (const [id, key] of [["dp-w2", "grad_w2"], ["dp-stream", "grad_stream"]]) {
    const counts = await page.$$eval(`#${id} polyline.series`, (els) => els.map((e) => [e.dataset.name, Number(e.dataset.count)]));
    eq(JSON.stringify(counts), JSON.stringify(P.map((p, k) => [["Pre-Norm", "Post-Norm", "DeepNorm"][k], doc[p][key].length])), `${id} curves`);
  }
  eq(doc.pre.grad_w2.length, L, "one grad_w2 per block");
  const rows = await tableRows(page, "#dp-table");
  eq(rows.length, L + 1, "one row per depth");
  const cells = [];
  rows.forEach((r, t) => P.forEach((p, k) => {
    if (t === 0) eq(r[1 + k].text, "", "no block 0");
    else cells.push([r[1 + k], doc[p].grad_w2[t - 1], `${p} grad_w2[${t - 1}]`]);
    cells.push([r[4 + k], doc[p].grad_stream[t], `${p} grad_stream[${t}]`]);
  }));
  await sameNumbers(page, cells);
  const explain = await page.textContent("#dp-explain");
  const f = (v) => page.evaluate((x) => window.normdFmt(x), v);
  for (const p of P) check(explain.includes(await f(doc[p].grad_w2[0])) && explain.includes(await f(doc[p].grad_w2[L - 1])), `the explanation quotes ${p}'s first and last block`);
  // the sweep: 5 depths x 5 seeds, the means recomputed here
  const sweepCalls = log.filter((e) => { const b = JSON.parse(e.body); return b.norm === want.norm && [6, 12, 24, 48, 96].includes(b.layers) && b.seed >= 1 && b.seed <= 5; });
  const byKey = new Map(sweepCalls.map((e) => { const b = JSON.parse(e.body); return [`${b.layers}/${b.seed}`, e]; }));
  eq(byKey.size, 25, "the sweep asked for 5 depths x 5 seeds");
  const means = [];
  for (const L2 of [6, 12, 24, 48, 96]) {
    const docs = await Promise.all([1, 2, 3, 4, 5].map((sd) => { const e = byKey.get(`${L2}/${sd}`); return apiPost(e.path, e.body).then((r) => r.doc); }));
    means.push(P.map((p) => docs.reduce((a, d) => a + Number(d[p].grad_w2[d[p].grad_w2.length - 1]), 0) / 5));
  }
  const srows = await tableRows(page, "#dp-sweep-table");
  eq(srows.length, 5, "five depths");
  await sameNumbers(page, srows.flatMap((r, i) => [...P.map((p, k) => [r[1 + k], means[i][k], `sweep L ${[6, 12, 24, 48, 96][i]} ${p}`]),
    [r[4], means[0][0] * Math.sqrt(6 / [6, 12, 24, 48, 96][i]), "1/sqrt(L) guide"]]));
  const dots = await page.$$eval("#dp-sweep circle.seed", (els) => els.length);
  eq(dots, 75, "a dot per placement, depth and seed");
  return {doc, means};
}

test("7. Gradients through depth: per-block gradients and the depth sweep", async ({page}) => {
  await page.goto(`${BASE}/#depth`);
  let {doc, means} = await checkDepth(page, {layers: 24, norm: "layer", seed: 1, tokens: 16, d: 64, gradients: true});
  // what the lesson says is what the numbers show (Xiong et al. 2020 Fig. 3 shape)
  check(means[4][0] < means[0][0] / 2, `Pre-Norm's last-block gradient falls with depth: ${means.map((m) => m[0])}`);
  check(means.every((m) => m[1] > m[0]), "Post-Norm's stays above Pre-Norm's at every depth");
  const sweepText = await page.textContent("#dp-sweep-explain");
  check(sweepText.includes("warm-up"), "the sweep explains warm-up");
  check(sweepText.includes(await page.evaluate((v) => window.normdFmt(v), means[4][0] / means[0][0])), "the sweep quotes Pre-Norm's measured ratio");
  await shot(page, "16-depth.png");
  await page.focus("#dp-layers");
  await page.keyboard.press("End");
  ({doc} = await checkDepth(page, {layers: 96, norm: "layer", seed: 1}));
  eq(await page.textContent("#dp-layers-val"), "96", "depth shown");
  eq(await page.getAttribute("#dp-layers", "aria-valuetext"), "96", "the slider speaks the depth");
  await page.selectOption("#dp-norm", "rms");
  await page.fill("#dp-seed", "3");
  await page.dispatchEvent("#dp-seed", "change");
  await checkDepth(page, {layers: 96, norm: "rms", seed: 3});
  await shot(page, "17-depth-sweep.png", {selector: "#depth .card:has(#dp-sweep-chart)"});
});

test("6 and 7 fit a 390 px wide phone screen", async ({page}) => {
  await page.setViewportSize({width: 390, height: 844});
  for (const [id, name] of [["backward", "18-backward-phone-390px.png"], ["depth", "19-depth-phone-390px.png"]]) {
    await page.goto(`${BASE}/#${id}`);
    if (id === "backward") await checkBackward(page);
    else await checkDepth(page, {layers: 24, norm: "layer", seed: 1});
    const w = await pageWidth(page);
    eq(w.doc, 390, `${id}: document width`);
    await shot(page, name);
  }
});

// The quizzes: every question answered wrong, then right; feedback follows
// at once. The article's six questions must have the corrected answers as
// the right ones (the key below is this test's own, not the page's).
const ARTICLE_KEY = {
  "bn-axes": {en: ["One feature", "batch"], zh: ["一个特征", "这一批"]},
  "ln-axes": {en: ["one token", "hidden dimension"], zh: ["一个词元", "隐藏维度"]},
  "why-ln": {en: ["does not depend on the batch"], zh: ["不依赖批次"]},
  "pre-post": {en: ["x + F(Norm(x))", "Norm(x + F(x))"], zh: ["x + F(Norm(x))", "Norm(x + F(x))"]},
  "why-pre": {en: ["residual path", "deep stacks"], zh: ["残差连接", "很深"], not: {en: ["shallow"], zh: ["层数少"]}},
  "rms-what": {en: ["skips the centering", "√(mean(x²) + ε)"], zh: ["省去中心化", "√(mean(x²) + ε)"]},
};
const LESSONS = ["axes", "try", "lnrms", "batch", "prepost", "backward", "depth"];

async function takeQuizzes(page, language) {
  const words = {en: {right: "Right.", wrong: "Not quite"}, zh: {right: "答对了。", wrong: "不对"}}[language];
  let article = 0, total = 0;
  for (const lesson of LESSONS) {
    await page.click(`#tab-${lesson}`);
    const qs = await page.$$eval(`#quiz-${lesson} fieldset.q`, (els) => els.map((e) => ({id: e.dataset.q, source: e.dataset.source,
      options: Array.from(e.querySelectorAll("input")).map((i) => ({value: i.value, text: i.parentElement.textContent.trim()}))})));
    check(qs.length >= 2 && qs.length <= 4, `${lesson}: ${qs.length} questions`);
    for (const q of qs) {
      total++;
      const fb = `#quiz-${lesson} fieldset[data-q="${q.id}"] .feedback`;
      check(await page.isHidden(fb), `${q.id}: no feedback before answering`);
      const verdicts = [];
      for (const o of q.options) {
        await page.check(`#quiz-${lesson} input[name="quiz-${q.id}"][value="${o.value}"]`);
        const cls = await page.getAttribute(fb, "class"), text = await page.textContent(fb);
        check(await page.isVisible(fb), `${q.id}: feedback shown at once`);
        const right = cls.includes("right");
        check(right !== cls.includes("wrong"), `${q.id}: feedback is right or wrong`);
        check(text.startsWith(right ? words.right : words.wrong), `${q.id} ${o.value}: feedback "${text}"`);
        verdicts.push({...o, right, feedback: text});
      }
      const rights = verdicts.filter((v) => v.right);
      eq(rights.length, 1, `${q.id}: one right answer`);
      const why = rights[0].feedback.slice(words.right.length).trim();
      check(why.length > 20, `${q.id}: the feedback explains`);
      for (const v of verdicts.filter((x) => !x.right)) {
        check(v.feedback.includes(rights[0].text), `${q.id}: a wrong answer's feedback names the right one`);
        check(v.feedback.endsWith(why), `${q.id}: a wrong answer's feedback explains too`);
      }
      if (q.source === "article") {
        article++;
        const key = ARTICLE_KEY[q.id];
        check(key, `${q.id} is not one of the article's questions`);
        if (key[language]) for (const w of key[language]) check(rights[0].text.includes(w), `${q.id}: the right answer "${rights[0].text}" lacks "${w}"`);
        if (key.not && key.not[language]) for (const w of key.not[language]) check(!rights[0].text.includes(w), `${q.id}: the right answer says "${w}"`);
      }
    }
  }
  eq(article, 6, "the article's six questions");
  return total;
}

test("the quizzes: every answer gets instant feedback, the article's answers corrected", async ({page}) => {
  await page.goto(`${BASE}/#axes`);
  await settle(page, "axes");
  const n = await takeQuizzes(page, "en");
  check(n >= 14, `${n} questions`);
  await page.click("#tab-depth");
  await page.locator("#quiz-depth").scrollIntoViewIfNeeded();
  await shot(page, "20-quiz.png", {selector: "#quiz-depth"});
});

// 简体中文: the two tables have the same keys; ?lang=, the browser's
// language and the remembered choice pick the language; <html lang>
// follows; after every lesson is driven, no visible text node of the
// Chinese page (HTML and SVG text, chart tooltips, aria-labels, every
// <option>) holds English outside code and this allow-list. Each entry is
// a pattern and why it may stay in Latin letters:
const KEPT_IN_CHINESE = [
  [/https?:\/\/\S+?(?=[，。；）\s]|$)/g, "URLs: the API base the learner typed, or the page's origin"],
  [/\btorch(?:\.nn\.LayerNorm|\.randn)?\b|\bPyTorch\b|\bLlama\b/g, "library, function, class and model names (first: torch.nn.LayerNorm before LayerNorm)"],
  [/\b(?:LayerNorm|RMSNorm|BatchNorm|GroupNorm|InstanceNorm)\b/g, "the English names the issue asks for beside 层归一化 etc.: the names met in code (torch.nn.LayerNorm)"],
  [/\b(?:Pre|Post)-(?:Norm|LN)\b/g, "the English names beside 前置/后置归一化, and Xiong et al.'s own labels Pre-LN / Post-LN"],
  [/[\u3400-\u9fff〇] \((?:tokens?|warm-up)\)/g, "English terms in brackets right after 词元 and 预热 on their first use, as Chinese LLM texts write them (〇: the bypass test's stand-in)"],
  [/\b(?:DeepNorm|DeepNet)\b/g, "a method's and a model's name (Wang et al. 2022); no established Chinese name"],
  [/\bAnnotated Transformer\b|\bTransformer\b/g, "the title of a work (Harvard NLP's Annotated Transformer) and the architecture's name, as Chinese texts write it"],
  [/\b(?:Xiong|Wang) et al\.?/g, "citations: authors' names"],
  [/\bnormd\b|\bAPI\b|\bJSON\b|\bHTTP\b|\bNaN\b|\bReLU\b|\bQ&A\b|\bSVG\b|\bmake run\b/g, "the program's name, format names, NaN as printed, ReLU, the make target to type"],
  [/\b(?:grad_input|grad_output|grad_w2|grad_stream|running_mean|running_var|num_batches_tracked|max_explain_elements|cors_origins|output_stats|stats\.shape|stats|xhat|eps|shape|data|gain|train|eval|float64)\b/g, "API field and step names and the mode values (\"mode\": \"train\" / \"eval\"), as the learner sees them in JSON and curl"],
  [/\b(?:Norm|rstd|rms|mean|cos|std|var|ms|loss|dx|dy)(?=\s*[(（=²ₜ\s:：，、/·）)]|$)/g, "formula names: rstd = 1/σ, rms = √(mean(x²) + ε), mean(g), cos(x₀, xₜ), ‖∂loss/∂xₜ‖, dx, dy"],
];
const KEPT_SOURCE = KEPT_IN_CHINESE.map(([re]) => re.source);

// Every visible string of the page: text nodes whose element is shown
// (checkVisibility), every <option> (shown when its list opens), SVG
// <title> tooltips and aria-label / placeholder / title attributes of
// shown elements. Code (code, pre, textarea) is left out, and so is the
// language switch, which names each language in itself (English / 简体中文).
async function visibleStrings(page) {
  return page.evaluate(() => {
    const out = [];
    const skip = (el) => el.closest("code, pre, textarea, script, style, #lang-select");
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement, text = n.textContent.trim();
      if (!text || !el || skip(el)) continue;
      if (el.tagName === "option" || el.tagName === "OPTION") { out.push(text); continue; }
      if (el.closest("title")) {
        const owner = el.closest("title").parentElement;
        if (owner && owner.closest("svg") && owner.closest("svg").checkVisibility()) out.push(text);
        continue;
      }
      if (el.checkVisibility()) out.push(text);
    }
    for (const el of document.querySelectorAll("[aria-label], [placeholder], [title]"))
      if (!skip(el) && el.checkVisibility())
        for (const a of ["aria-label", "placeholder", "title"]) if (el.getAttribute(a)) out.push(el.getAttribute(a));
    return out;
  });
}

// The English left in a list of strings once the allow-list is taken out:
// any run of two or more Latin letters.
function englishIn(strings) {
  const left = [];
  for (const text of strings) {
    let rest = text;
    for (const src of KEPT_SOURCE) rest = rest.replace(new RegExp(src, "g"), " ");
    if (/[A-Za-z]{2,}/.test(rest)) left.push(text);
  }
  return left;
}

// Drives a lesson the way a learner would (in whatever language is set),
// so that the views it draws from script are all on the page.
async function driveLesson(page, lesson) {
  await page.click(`#tab-${lesson}`);
  await settle(page, lesson);
  if (lesson === "try") {
    await page.click("#try-preset-torch");
    await settle(page, "try");
  }
  if (lesson === "backward") {
    await page.click("#bw-mistake");
    await page.waitForSelector("#bw-verdict .note");
  }
}

test("简体中文: the string tables, the language switch and a Chinese page", async ({page}) => {
  const missing = [];
  page.on("console", (m) => { if (/missing string/.test(m.text())) missing.push(m.text()); });
  await page.goto(`${BASE}/?lang=en#axes`);
  const keys = await page.evaluate(() => Object.fromEntries(Object.entries(window.normdStrings).map(([l, tb]) => [l, Object.keys(tb).sort()])));
  eq(JSON.stringify(Object.keys(keys).sort()), '["en","zh"]', "two languages");
  const onlyEn = keys.en.filter((k) => !keys.zh.includes(k)), onlyZh = keys.zh.filter((k) => !keys.en.includes(k));
  check(onlyEn.length === 0 && onlyZh.length === 0, `keys only in en: ${onlyEn}; only in zh: ${onlyZh}`);
  // every data-i18n key of the page is in the tables
  const used = await page.$$eval("[data-i18n]", (els) => els.map((e) => e.dataset.i18n));
  check(used.length > 150 && used.every((k) => keys.en.includes(k)), "every static string has a key");
  eq(await page.getAttribute("html", "lang"), "en", "html lang en");
  // ?lang=zh
  await page.goto(`${BASE}/?lang=zh#backward`);
  await settle(page, "backward");
  eq(await page.getAttribute("html", "lang"), "zh-Hans", "html lang zh-Hans");
  eq(await page.textContent("#tab-backward"), "6. 反向传播", "Chinese tabs");
  check((await page.textContent("#backward h2")).includes("反向传播"), "Chinese lesson heading");
  const english = [];
  for (const lesson of LESSONS) {
    await driveLesson(page, lesson);
    const shown = await visibleStrings(page);
    check(shown.length > 40, `${lesson}: ${shown.length} strings seen`);
    english.push(...englishIn(shown).map((text) => `${lesson}: ${text}`));
    await shot(page, `3${LESSONS.indexOf(lesson)}-zh-${LESSONS.indexOf(lesson) + 1}-${lesson}.png`);
  }
  check(english.length === 0, `English left on the Chinese page:\n  ${[...new Set(english)].join("\n  ")}`);
  // the API's problems: the code's message leads, normd's English detail
  // waits behind a click
  await page.click("#tab-try");
  await page.check("input[name=try-source][value=paste]");
  await expectingConsoleErrors([/status of 422/], async () => {
    await page.fill("#try-json", '{"shape": [2, 3], "data": [1, 2]}');
    await page.click("#try-run");
    await settle(page, "try");
  });
  const problem = await page.textContent("#try .problem strong");
  check(problem.startsWith("data 与形状不符") && problem.includes("422"), `the problem's heading in Chinese: ${problem}`);
  check(await page.isHidden("#try .problem details p"), "normd's English detail is folded away");
  eq(await page.getAttribute("#try .problem details p", "lang"), "en", "and marked as English");
  eq(JSON.stringify(englishIn(await visibleStrings(page))), "[]", "no English with a problem shown");
  await shot(page, "29-zh-try-api-problem.png", {selector: "#try .problem"});
  await page.fill("#try-json", "[[1, 2,");
  await page.click("#try-run");
  await settle(page, "try");
  eq(JSON.stringify(englishIn(await visibleStrings(page))), "[]", "no English for the page's own JSON check");
  await shot(page, "28-zh-try-problem.png", {selector: "#try .problem"});
  await page.check("input[name=try-source][value=generate]");
  await settle(page, "try");
  eq(JSON.stringify(missing), "[]", "every key the page asked for is in the tables");
  await settle(page, "depth");
  await shot(page, "23-zh-depth.png");
  await page.click("#tab-backward");
  await checkBackward(page);
  await shot(page, "24-zh-backward.png");
  // the quizzes in Chinese, right and wrong
  await takeQuizzes(page, "zh");
  await page.click("#tab-lnrms");
  await shot(page, "25-zh-quiz.png", {selector: "#quiz-lnrms"});
  // the switch: back to English, remembered without ?lang
  await page.selectOption("#lang-select", "en");
  eq(await page.getAttribute("html", "lang"), "en", "switched to English");
  check(page.url().includes("lang=en"), `the URL follows: ${page.url()}`);
  eq(await page.textContent("#quiz-lnrms h3"), "Check yourself", "the quiz follows the switch");
  await page.selectOption("#lang-select", "zh");
  await page.goto(`${BASE}/#axes`);
  eq(await page.getAttribute("html", "lang"), "zh-Hans", "the choice is remembered");
  await page.evaluate(() => localStorage.removeItem("normd.lang"));
  await page.reload();
  eq(await page.getAttribute("html", "lang"), "en", "no choice, an English browser: English");
});

// No visible string bypasses the tables: every Han character of the zh
// table is turned into 〇 (window.normdStrings is the table t() reads),
// the page redrawn and every lesson driven again. A Han character still
// on the page came from somewhere else (a literal in the script or the
// HTML); English is caught as above.
test("简体中文: no visible string bypasses the tables", async ({page}) => {
  await page.goto(`${BASE}/?lang=zh#axes`);
  await settle(page, "axes");
  const changed = await page.evaluate(() => {
    let n = 0;
    const zh = window.normdStrings.zh;
    for (const k of Object.keys(zh)) {
      const v = zh[k].replace(/[\u3400-\u9fff]/g, "〇");
      if (v !== zh[k]) n++;
      zh[k] = v;
    }
    return n;
  });
  check(changed > 400, `${changed} strings hold Chinese`);
  await page.selectOption("#lang-select", "en");
  await page.selectOption("#lang-select", "zh");
  const bypass = [], english = [];
  for (const lesson of LESSONS) {
    await driveLesson(page, lesson);
    const shown = await visibleStrings(page);
    bypass.push(...shown.filter((text) => /[\u3400-\u9fff]/.test(text.replace(/〇/g, ""))).map((text) => `${lesson}: ${text}`));
    english.push(...englishIn(shown).map((text) => `${lesson}: ${text}`));
  }
  check(bypass.length === 0, `Chinese not from the table:\n  ${[...new Set(bypass)].join("\n  ")}`);
  check(english.length === 0, `English not from the table:\n  ${[...new Set(english)].join("\n  ")}`);
  check((await page.textContent("#api-status")).includes("〇"), "the status line comes from the table");
});

test("简体中文: the browser's language picks it, and it fits a phone", async ({page}) => {
  await page.addInitScript(() => Object.defineProperty(navigator, "language", {get: () => "zh-CN"}));
  await page.setViewportSize({width: 390, height: 844});
  await page.goto(`${BASE}/#depth`);
  eq(await page.getAttribute("html", "lang"), "zh-Hans", "a Chinese browser gets Chinese");
  eq(await page.inputValue("#lang-select"), "zh", "the switch shows it");
  await checkDepth(page, {layers: 24, norm: "layer", seed: 1});
  eq((await pageWidth(page)).doc, 390, "document width");
  await shot(page, "26-zh-depth-phone-390px.png");
  await page.goto(`${BASE}/#backward`);
  await checkBackward(page);
  eq((await pageWidth(page)).doc, 390, "document width");
  await shot(page, "27-zh-backward-phone-390px.png");
  // the other lessons, driven, at the same width
  for (const lesson of LESSONS.filter((l) => l !== "backward" && l !== "depth")) {
    await driveLesson(page, lesson);
    eq((await pageWidth(page)).doc, 390, `${lesson}: document width`);
    await shot(page, `4${LESSONS.indexOf(lesson)}-zh-${LESSONS.indexOf(lesson) + 1}-${lesson}-phone-390px.png`);
  }
});

test("the page works from another origin with ?api= (CORS)", async ({page, port, staticPort}) => {
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  await page.goto(`http://127.0.0.1:${staticPort}/?api=http://127.0.0.1:${port}#try`);
  await page.waitForSelector("#api-status.ok", {timeout: 10000});
  eq(await page.inputValue("#api-base"), `http://127.0.0.1:${port}`, "API base from ?api=");
  check(requests.includes(`http://127.0.0.1:${staticPort}/normd.js`), "normd.js from beside the page");
  await checkTry(page, {norm: "layer"});
  const apiCalls = requests.filter((u) => u.includes("/v1/"));
  check(apiCalls.length > 0 && apiCalls.every((u) => u.startsWith(`http://127.0.0.1:${port}/`)), "every API call goes to normd");
  eq(await page.getAttribute("#link-info", "href"), `http://127.0.0.1:${port}/v1/info`, "links follow the API base");
  await openView(page, "prepost");
  await checkPrePost(page, {layers: 48});
  await shot(page, "11-another-origin.png");
  // a wrong base says so; the right one reconnects
  await expectingConsoleErrors([/ERR_CONNECTION_REFUSED|Failed to fetch|Failed to load resource/], async () => {
    await page.fill("#api-base", "http://127.0.0.1:9");
    await page.click("#api-form button");
    await page.waitForSelector("#api-status.bad", {timeout: 10000});
    await settle(page, "prepost");
  });
  check(!(await page.isHidden("#prepost .problem")), "the lesson says normd cannot be reached");
  check(page.url().includes("api=http%3A%2F%2F127.0.0.1%3A9") || page.url().includes("api=http://127.0.0.1:9"), `the URL keeps the base: ${page.url()}`);
  await page.fill("#api-base", `http://127.0.0.1:${port}`);
  await page.click("#api-form button");
  await page.waitForSelector("#api-status.ok", {timeout: 10000});
  await checkPrePost(page, {layers: 48});
  check(await page.isHidden("#prepost .problem"), "the problem is gone");
});

test("the page alone on another host loads normd.js from the daemon", async ({page, port, staticPort}) => {
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  await expectingConsoleErrors([/Failed to load resource.*404/], async () => {
    await page.goto(`http://127.0.0.1:${staticPort}/alone/?api=http://127.0.0.1:${port}#lnrms`);
    await page.waitForSelector("#api-status.ok", {timeout: 10000});
  });
  check(requests.includes(`http://127.0.0.1:${staticPort}/alone/normd.js`), "tried beside the page first");
  check(requests.includes(`http://127.0.0.1:${port}/normd.js`), "then the daemon's");
  await settle(page, "lnrms");
  const last = await lastCall(page, "/v1/norm/layer");
  eq(last.status, 200, "the lesson's request through the daemon's normd.js");
});

// examples/embed.html: normd.js from the daemon, a chart of LayerNorm(x) and
// RMSNorm(x) for x = sin(i / 2) + shift, i < 16; every bar is the API's number.
test("examples/embed.html on another origin draws the daemon's numbers", async ({page, port, staticPort}) => {
  const requests = [];
  page.on("request", (r) => requests.push(r.url()));
  await page.goto(`http://127.0.0.1:${staticPort}/embed.html?url=http://127.0.0.1:${port}`);
  const c = normdJs.client(BASE);
  for (const shift of ["2", "-3.5"]) {
    if (shift !== "2") await page.$eval("#shift", (el, v) => { el.value = v; el.dispatchEvent(new Event("input")); }, shift);
    await page.waitForSelector(`#chart[data-shift="${shift}"]`, {timeout: 10000});
    const x = Float32Array.from({length: 16}, (_, i) => Math.sin(i / 2) + Number(shift));
    const [layer, rms] = await Promise.all([c.layerNorm(x), c.rmsNorm(x)]);
    const bars = await page.$$eval("#chart rect", (rs) => rs.map((r) => ({fill: r.getAttribute("fill"), value: r.dataset.value,
      height: Number(r.getAttribute("height"))})));
    const drawn = (fill) => bars.filter((b) => b.fill === fill);
    eq(drawn("#009E73").map((b) => b.value).join(" "), Array.from(layer.output, String).join(" "), `LayerNorm bars, shift ${shift}`);
    eq(drawn("#D55E00").map((b) => b.value).join(" "), Array.from(rms.output, String).join(" "), `RMSNorm bars, shift ${shift}`);
    check(bars.some((b) => b.height > 10), "the bars have heights");
    const status = await page.textContent("#status");
    check(status.includes(layer.stats.mean[0].toFixed(3)), `status "${status}" shows the mean`);
  }
  check(requests.includes(`http://127.0.0.1:${port}/normd.js`), "normd.js from the daemon");
  // the ES-module wrapper, imported across origins like any module
  const viaModule = await page.evaluate(async (base) => {
    const m = await import(`${base}/normd.mjs`);
    const r = await m.client(base).layerNorm([[1, 2, 3]]);
    return {named: typeof m.client, isDefault: m.default.client === m.client, output: Array.from(r.output, String)};
  }, BASE);
  eq(viaModule.named, "function", "normd.mjs's named export");
  check(viaModule.isDefault, "normd.mjs's default export is the same client");
  eq(viaModule.output.join(" "), Array.from((await c.layerNorm([[1, 2, 3]])).output, String).join(" "), "a layer norm through normd.mjs");
  check(requests.filter((u) => u.includes("/v1/")).every((u) => u.startsWith(`http://127.0.0.1:${port}/`)), "API calls to normd");
  await shot(page, "45-embed-another-origin.png");
});

test("the browser console has no errors", async () => {
  check(consoleErrors.length === 0, `console errors:\n  ${consoleErrors.join("\n  ")}`);
});

// ------------------------------------------------------------------- main

async function main() {
  const only = process.env.ONLY || "";
  const {proc, port} = await startNormd();
  BASE = `http://127.0.0.1:${port}`;
  const {server, port: staticPort} = await startStatic();
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), "normd-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: {width: 1280, height: 900},
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"],
  });
  let passed = 0, failed = 0;
  try {
    for (const t of tests) {
      if (only && !t.name.includes(only)) continue;
      const page = await context.newPage();
      watch(page);
      const t0 = Date.now();
      try {
        await withTimeout(t.fn({page, port, staticPort}), TEST_MS, t.name);
        passed++;
        console.log(`ok   ${t.name} (${Date.now() - t0} ms)`);
      } catch (e) {
        failed++;
        console.log(`FAIL ${t.name}\n     ${(e instanceof Check ? e.message : e.stack || String(e)).split("\n").join("\n     ")}`);
        try { await page.screenshot({path: path.join(SHOTS, `failed-${tests.indexOf(t) + 1}.png`), fullPage: true}); } catch (e2) { /* page gone */ }
      } finally {
        await page.close().catch(() => {});
      }
    }
  } finally {
    await context.close().catch(() => {});
    fs.rmSync(profile, {recursive: true, force: true});
    server.close();
    proc.kill("SIGTERM");
  }
  console.log(`screenshots in ${path.relative(REPO, SHOTS) || "."}: ${screenshots.join(", ")}`);
  console.log(`browser: ${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 ? 0 : 1;
}

main().catch((e) => {
  console.log(`browser: setup failed: ${e.stack || e}`);
  console.log("browser: 0 passed, 1 failed");
  process.exitCode = 1;
});
