// The browser demo end to end in headless Chromium (WebGPU on SwiftShader here), driven by
// tests/web.rs: node web/test/page.mjs CASES.json OUT_DIR
//
// CASES.json: {model, dist, maxTokens, speculate, prompts: [{prompt, ids}]}, the ids from
// `ultra generate --json` on the CPU. Serves web/dist with the model as /model.gguf and a corrupt
// file as /corrupt.gguf, then checks, for every prompt: WebGPU ids = the CLI's, the same with
// prompt-lookup speculation, the same on the forced CPU fallback; then that a corrupt file shows
// the engine's error in the page. No uncaught exception anywhere. Writes OUT_DIR/page.png (after
// generation) and OUT_DIR/results.json (every figure). Exits non-zero on any failure.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { chromium } from 'playwright-core';

const [casesPath, outDir] = process.argv.slice(2);
const cases = JSON.parse(fs.readFileSync(casesPath, 'utf8'));
fs.mkdirSync(outDir, { recursive: true });

const types = { '.html': 'text/html', '.js': 'text/javascript', '.wasm': 'application/wasm' };
// A GGUF header whose tensor count is absurd: the engine must refuse it with an error.
const corrupt = Buffer.concat([Buffer.from('GGUF'), Buffer.from([3, 0, 0, 0]), Buffer.alloc(16, 0xff)]);
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://x').pathname;
  const file = url === '/model.gguf' ? cases.model : path.join(cases.dist, path.normalize(url === '/' ? '/index.html' : url));
  if (url === '/corrupt.gguf') return res.writeHead(200, { 'content-length': corrupt.length }).end(corrupt);
  fs.stat(file, (err, st) => {
    if (err || !st.isFile()) return res.writeHead(404).end('not found');
    res.writeHead(200, { 'content-type': types[path.extname(file)] ?? 'application/octet-stream', 'content-length': st.size });
    fs.createReadStream(file).pipe(res);
  });
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;

const browser = await chromium.launch({
  executablePath: process.env.ULTRA_CHROMIUM ?? '/usr/bin/chromium',
  args: ['--enable-unsafe-webgpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
});
const failures = [];
const results = { runs: [] };
const check = (ok, what) => { if (!ok) failures.push(what); console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`); };
try {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  const uncaught = [];
  page.on('pageerror', (e) => uncaught.push(e.message));
  page.on('console', (m) => m.type() === 'error' && console.log(`[page console] ${m.text()}`));
  page.setDefaultTimeout(600_000);

  // From navigation to the first token: engine start, download, upload, prefill.
  await page.goto(`${base}/index.html?model=`);
  await page.waitForFunction(() => window.ultra);
  const first = await page.evaluate(async ([prompt, maxTokens]) => {
    const info = await window.ultra.load('model.gguf', { backend: 'webgpu' });
    let firstToken = null;
    await window.ultra.generate({ prompt, maxTokens, onToken: () => { firstToken ??= performance.now(); } });
    return { info, pageLoadToFirstTokenMs: firstToken };
  }, [cases.prompts[0].prompt, 2]); // two tokens: the decode kernels compile here, not in the timed runs
  results.model = first.info;
  results.pageLoadToFirstTokenMs = first.pageLoadToFirstTokenMs;
  console.log(`page load to first token: ${first.pageLoadToFirstTokenMs.toFixed(0)} ms (${first.info.adapter})`);

  const generate = (options) => page.evaluate((o) => window.ultra.generate(o), options);
  for (const [mode, backend, speculate] of [['webgpu', 'webgpu', 0], ['webgpu+lookup', 'webgpu', cases.speculate], ['cpu', 'cpu', 0]]) {
    for (const c of cases.prompts) {
      const t0 = Date.now();
      const r = await generate({ prompt: c.prompt, maxTokens: cases.maxTokens, temperature: 0, speculate, backend });
      results.runs.push({ mode, prompt: c.prompt, wallMs: Date.now() - t0, ...r });
      check(r.backend === backend, `${mode} ${JSON.stringify(c.prompt)}: backend reads ${r.backend}`);
      check(JSON.stringify(r.ids) === JSON.stringify(c.ids),
        `${mode} ${JSON.stringify(c.prompt)}: ids ${JSON.stringify(r.ids)} vs the CLI's ${JSON.stringify(c.ids)}`);
      console.log(`     ${((Date.now() - t0) / 1000).toFixed(1)} s: prefill ${r.prefillTokS.toFixed(1)} tok/s, decode ${r.decodeTokS.toFixed(1)} tok/s` +
        (speculate ? `, ${(100 * r.acceptanceRate).toFixed(0)}% accepted, ${r.tokensPerPass.toFixed(2)} tokens/pass` : ''));
      if (mode === 'webgpu+lookup' && c === cases.prompts[0]) {
        await page.screenshot({ path: path.join(outDir, 'page.png'), fullPage: true });
      }
    }
  }

  // A corrupt file: the promise rejects with the engine's message, which the page shows.
  const bad = await page.evaluate(() => window.ultra.load('corrupt.gguf').then(() => null, (e) => String(e.message ?? e)));
  const shown = await page.textContent('#status');
  const isError = await page.evaluate(() => document.getElementById('status').classList.contains('error'));
  results.corruptError = bad;
  check(bad !== null && bad.length > 0, `corrupt file rejected: ${bad}`);
  check(isError && bad !== null && shown.includes(bad), `the page shows it: ${JSON.stringify(shown)}`);
  await page.screenshot({ path: path.join(outDir, 'corrupt.png') });
  check(uncaught.length === 0, `no uncaught exception in the page${uncaught.length ? `: ${uncaught.join('; ')}` : ''}`);
} catch (e) {
  failures.push(`the run stopped: ${e.stack ?? e}`);
  console.log(`FAIL ${e.stack ?? e}`);
} finally {
  fs.writeFileSync(path.join(outDir, 'results.json'), JSON.stringify(results, null, 2));
  await browser.close();
  server.close();
}
if (failures.length) {
  console.log(`\n${failures.length} failure(s)`);
  process.exit(1);
}
