//! The browser demo (web/) end to end: `web/test/page.mjs` drives the built page (web/dist) in
//! headless Chromium, WebGPU on its software adapter, and its tokens must equal `ultra generate
//! --json`'s on the CPU: plainly, with prompt-lookup speculation, and on the page's forced CPU
//! fallback; a corrupt file must show the engine's error in the page.
//!
//! Needs the page built (`web/build.sh`), Chromium (`/usr/bin/chromium`) and the test's npm
//! packages (`npm ci --prefix web/test`); without them it skips loudly, and fails instead under
//! `ULTRA_REQUIRE_WEB=1` (as `.ci/run` sets, after building them). Screenshots and figures land in
//! `$CARGO_TARGET_TMPDIR/web/` (page.png, corrupt.png, results.json).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{NEAR_TIE, model_path, reference_runner, teacher_forced, top2};
use serde_json::{Value, json};
use ultra::Cpu;

/// Greedy tokens per prompt; both prompts keep the CPU's top-2 logit gap ≥ `NEAR_TIE` at every
/// one of these steps (checked below; the minima are 1.90 and 0.31), so a correct WebGPU run
/// cannot pick differently. Both continue what they hold (a count, a list of names), so prompt
/// lookup has drafts to propose. The second is the chat template's text, written out.
const MAX_TOKENS: usize = 24;
const PROMPTS: [&str; 2] = [
    "1, 2, 3, 4, 5, 6, 7, 8,",
    "<|im_start|>user\nName the planets of the solar system.<|im_end|>\n<|im_start|>assistant\n",
];
/// Prompt-lookup draft length for the speculative runs.
const SPECULATE: usize = 4;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Why the browser run cannot happen here, if it cannot.
fn missing() -> Option<String> {
    let chromium = std::env::var("ULTRA_CHROMIUM").unwrap_or("/usr/bin/chromium".into());
    let needs = [
        (root().join("web/dist/index.html"), "the built page (web/build.sh)"),
        (root().join("web/dist/ultra_web_bg.wasm"), "the built engine (web/build.sh)"),
        (root().join("web/test/node_modules/playwright-core"), "playwright-core (npm ci --prefix web/test)"),
        (PathBuf::from(chromium), "Chromium (apt-get install chromium)"),
    ];
    let absent: Vec<&str> = needs.iter().filter(|(p, _)| !p.exists()).map(|(_, what)| *what).collect();
    (!absent.is_empty()).then(|| absent.join(", "))
}

/// `ultra generate --json` on the CPU: the generated ids.
fn cli_ids(model: &Path, prompt: &str) -> Vec<u32> {
    let out = Command::new(env!("CARGO_BIN_EXE_ultra"))
        .args(["generate", "--json", "--backend", "cpu", "--max-tokens", &MAX_TOKENS.to_string(), "--prompt", prompt])
        .arg("--model")
        .arg(model)
        .output()
        .expect("run ultra generate");
    assert!(out.status.success(), "ultra generate failed: {}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("generate --json prints JSON");
    common::ids(&v["tokens"])
}

#[test]
fn browser_demo_matches_the_cli() {
    if let Some(what) = missing() {
        let msg = format!("SKIPPED: the browser demo test needs {what}");
        assert!(std::env::var("ULTRA_REQUIRE_WEB").as_deref() != Ok("1"), "ULTRA_REQUIRE_WEB=1 but {msg}");
        eprintln!("{msg}");
        return;
    }
    let model = model_path();
    let gguf = ultra::gguf::Gguf::open(&model).expect("reference model");
    let tokenizer = ultra::tokenizer::Tokenizer::from_gguf(&gguf).expect("tokenizer");
    let mut runner = reference_runner(Cpu::new(), 256);
    let mut cases = Vec::new();
    for prompt in PROMPTS {
        let ids = cli_ids(&model, prompt);
        assert_eq!(ids.len(), MAX_TOKENS, "{prompt:?}: the CLI stopped early at {ids:?}");
        let prompt_ids = tokenizer.encode_prompt(prompt, false).expect("encode");
        for (step, row) in teacher_forced(&mut runner, &prompt_ids, &ids).iter().enumerate() {
            let (best, gap) = top2(row);
            assert_eq!(best, ids[step], "{prompt:?} step {step}: the CLI's token is not the CPU's argmax");
            assert!(gap >= NEAR_TIE, "{prompt:?} step {step}: top-2 gap {gap:.3} < {NEAR_TIE}: choose another prompt");
        }
        cases.push(json!({ "prompt": prompt, "ids": ids }));
    }
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("web");
    std::fs::create_dir_all(&out).expect("output dir");
    let spec = json!({
        "model": model, "dist": root().join("web/dist"), "maxTokens": MAX_TOKENS, "speculate": SPECULATE,
        "prompts": cases,
    });
    let cases_path = out.join("cases.json");
    std::fs::write(&cases_path, spec.to_string()).expect("write cases");
    let status = Command::new("node")
        .arg(root().join("web/test/page.mjs"))
        .arg(&cases_path)
        .arg(&out)
        .status()
        .expect("run node (apt-get install nodejs)");
    assert!(status.success(), "web/test/page.mjs failed (its output is above; screenshots in {})", out.display());
}
