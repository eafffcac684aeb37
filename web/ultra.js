// The page's engine API and its controls. `window.ultra` is the API (for the page, for tests and
// for people who embed it); every call goes through the one wasm engine, one call at a time.
//
//   await ultra.load(source, {backend, wgpuDisable, onProgress})   source: a URL (relative ones too), File or bytes
//   await ultra.generate({prompt, maxTokens, temperature, topK, topP, seed, speculate, backend, chat, onToken})
//     → {ids, text, prefillTokS, decodeTokS, acceptanceRate, backend, adapter, tokensPerPass, promptTokens}
import init, * as engine from './ultra_web.js';

const $ = (id) => document.getElementById(id);
const wasmReady = init();

// Calls run one after another: the engine holds one model and one generation at a time.
let queue = Promise.resolve();
function serial(fn) {
  const run = queue.then(fn);
  queue = run.catch(() => {});
  return run;
}

function status(text, error = false) {
  $('status').textContent = text;
  $('status').classList.toggle('error', error);
}

// The file's bytes, reporting (received, total) as they arrive; total is 0 when unknown.
async function fetchBytes(url, onProgress) {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url}: HTTP ${res.status} ${res.statusText}`);
  const total = Number(res.headers.get('content-length')) || 0;
  const chunks = [];
  let received = 0;
  const reader = res.body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    received += value.length;
    onProgress(received, total);
  }
  const bytes = new Uint8Array(received);
  let at = 0;
  for (const c of chunks) { bytes.set(c, at); at += c.length; }
  return bytes;
}

const mib = (n) => (n / 2 ** 20).toFixed(1);

function showProgress(received, total) {
  $('progress').max = total || 1;
  $('progress').value = total ? received : 0;
  status(`downloading ${mib(received)}${total ? ` of ${mib(total)}` : ''} MiB`);
}

async function load(source, { backend = 'auto', wgpuDisable, onProgress = showProgress } = {}) {
  return serial(async () => {
    $('generate').disabled = true;
    try {
      await wasmReady;
      let bytes;
      if (typeof source === 'string' || source instanceof URL) {
        bytes = await fetchBytes(new URL(source, document.baseURI), onProgress);
      } else if (source instanceof Blob) {
        bytes = new Uint8Array(await source.arrayBuffer());
      } else {
        bytes = new Uint8Array(source);
      }
      status(`parsing and uploading ${mib(bytes.length)} MiB…`);
      await new Promise(requestAnimationFrame); // let the status paint before the long call
      const info = JSON.parse(await engine.load(bytes, backend, undefined, wgpuDisable));
      if (info.backend === 'webgpu' && !info.adapter) info.adapter = await adapterLabel();
      $('progress').max = 1;
      $('progress').value = 1;
      status(`loaded: ${info.architecture}, ${info.nLayers} layers, on ${info.backend} (${info.adapter})`);
      $('s-backend').textContent = info.backend;
      $('s-adapter').textContent = info.adapter;
      $('generate').disabled = false;
      return info;
    } catch (e) {
      status(`error: ${e.message ?? e}`, true);
      throw e;
    }
  });
}

// What the browser says of its WebGPU adapter (wgpu reports only the description, often empty).
async function adapterLabel() {
  const a = await navigator.gpu?.requestAdapter({ powerPreference: 'high-performance' });
  if (!a) return 'unknown adapter';
  const i = a.info ?? {};
  const words = [i.vendor, i.architecture, i.device, i.description].filter(Boolean).join(' ') || 'unnamed adapter';
  return (i.isFallbackAdapter ?? a.isFallbackAdapter) ? `${words} (fallback adapter)` : words;
}
let adapter = null; // the label, once asked for

async function generate(options = {}) {
  const { onToken, ...request } = options;
  return serial(async () => {
    const start = performance.now();
    let first = null;
    $('output').textContent = '';
    status('generating…');
    try {
      const result = JSON.parse(await engine.generate(JSON.stringify(request), (id, text) => {
        first ??= performance.now();
        $('output').textContent += text;
        onToken?.(id, text);
      }));
      result.firstTokenMs = first === null ? null : first - start;
      if (result.backend === 'webgpu' && !result.adapter) result.adapter = adapter ??= await adapterLabel();
      showStats(result);
      status(`done: ${result.ids.length} tokens`);
      return result;
    } catch (e) {
      status(`error: ${e.message ?? e}`, true);
      throw e;
    }
  });
}

function showStats(r) {
  $('s-backend').textContent = r.backend;
  $('s-adapter').textContent = r.adapter;
  $('s-prompt').textContent = `${r.promptTokens} tokens`;
  $('s-prefill').textContent = `${r.prefillTokS.toFixed(1)} tok/s`;
  $('s-decode').textContent = `${r.decodeTokS.toFixed(1)} tok/s`;
  $('s-first').textContent = r.firstTokenMs === null ? '–' : `${r.firstTokenMs.toFixed(0)} ms after the call`;
  $('s-accept').textContent = r.acceptanceRate === null ? 'off' : `${(100 * r.acceptanceRate).toFixed(0)}%`;
  $('s-pass').textContent = r.tokensPerPass.toFixed(2);
}

window.ultra = { load, generate };

// The controls: the page's own calls of the API, errors shown in the status line.
const num = (id) => Number($(id).value);
const quiet = (promise) => promise.catch(() => {}); // shown in the status line already
$('load').onclick = () => quiet(load($('url').value, { backend: $('backend').value }));
$('file').onchange = () => $('file').files[0] && quiet(load($('file').files[0], { backend: $('backend').value }));
$('generate').onclick = () => quiet(generate({
  prompt: $('prompt').value,
  chat: $('chat').checked,
  maxTokens: num('maxTokens'),
  temperature: num('temperature'),
  topK: num('topK'),
  topP: num('topP'),
  seed: num('seed'),
  speculate: num('speculate'),
  backend: $('backend').value,
}));

wasmReady.then(
  () => {
    // The reference model beside the page loads by itself (`?model=URL` for another, `?model=` for none).
    const model = new URLSearchParams(location.search).get('model') ?? 'model.gguf';
    if (model) {
      $('url').value = model;
      quiet(load(model));
    } else {
      status('engine ready: load a model');
    }
  },
  (e) => status(`error: the engine failed to start: ${e.message ?? e}`, true),
);
