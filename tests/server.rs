//! `ultra serve` end to end: starts the server on 127.0.0.1 (a free port) with the reference
//! model and runs the Python suites of `tests/server/` against it: the real `openai` client, 64
//! concurrent streams with hang-ups, the table of bad requests, schemathesis fuzzing, and a
//! server speculating with prompt lookup.
//!
//! The Python side needs `openai`, `schemathesis` and `requests` (`.ci/run` installs them into
//! `target/serve-venv`). Without them these tests print SKIPPED and pass, except under CI=true,
//! where they fail. `ULTRA_PYTHON` picks the interpreter; `ULTRA_SERVE_BIN` another `ultra`
//! binary than the one cargo built (a target directory shared with other checkouts can have
//! had it rebuilt from another branch meanwhile).

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The suites run one at a time: each starts a server that uses every core.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn binary() -> PathBuf {
    std::env::var_os("ULTRA_SERVE_BIN").map_or_else(|| env!("CARGO_BIN_EXE_ultra").into(), PathBuf::from)
}

fn ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The interpreter with the suites' packages, or None (after saying why) to skip.
fn python() -> Option<PathBuf> {
    let venv = Path::new(ROOT).join("target/serve-venv/bin/python");
    let candidates: Vec<PathBuf> = match std::env::var_os("ULTRA_PYTHON") {
        Some(p) => vec![p.into()],
        None => vec![venv, "python3".into()],
    };
    for p in &candidates {
        let ok = Command::new(p).args(["-c", "import openai, schemathesis, requests"]).output();
        if ok.is_ok_and(|o| o.status.success()) {
            return Some(p.clone());
        }
    }
    let why =
        format!("no Python with openai, schemathesis and requests (tried {candidates:?}; `.ci/run` installs them)");
    assert!(!ci(), "CI=true: {why}");
    eprintln!("SKIPPED: {why}");
    None
}

/// A running `ultra serve`, killed on drop.
struct Server {
    child: Child,
    url: String,
}

impl Server {
    fn start(args: &[&str]) -> Server {
        let model = common::model_path();
        let mut child = Command::new(binary())
            .arg("serve")
            .arg("--model")
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", "0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("ultra serve starts");
        let stdout = child.stdout.take().expect("piped stdout");
        let mut lines = BufReader::new(stdout).lines();
        let url = loop {
            let line = lines.next().expect("the server prints its address").expect("readable stdout");
            if let Some(at) = line.find("http://") {
                break line[at..].trim().to_string();
            }
        };
        // Keep draining stdout so the server never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `tests/server/<script>` against a server started with `args`.
fn suite(script: &str, args: &[&str], api_key: Option<&str>) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let Some(python) = python() else { return };
    let server = Server::start(args);
    let dir = Path::new(ROOT).join("tests/server");
    let mut cmd = Command::new(python);
    cmd.arg(dir.join(script))
        .current_dir(&dir)
        .env("ULTRA_URL", &server.url)
        .env("ULTRA_BIN", binary())
        .env("ULTRA_CACHE", ultra::fetch::cache_dir());
    if let Some(key) = api_key {
        cmd.env("ULTRA_API_KEY", key);
    }
    let status = cmd.status().expect("python runs");
    // The server must still be up: no request took it down.
    let mut server = server;
    std::thread::sleep(Duration::from_millis(50));
    assert!(server.child.try_wait().expect("server status").is_none(), "{script}: the server exited");
    assert!(status.success(), "{script} failed against {}", server.url);
}

#[test]
fn openai_client_chat_completions_streaming_stop_usage() {
    suite("openai_client.py", &["--ctx", "1024"], None);
}

#[test]
fn lookup_speculation_serves_the_same_greedy_tokens() {
    suite("speculative.py", &["--ctx", "1024", "--draft-mode", "lookup", "--speculate", "4"], None);
}

#[test]
fn sixty_four_streams_with_sixteen_hang_ups_leak_nothing() {
    suite("load.py", &["--ctx", "512"], None);
}

#[test]
fn bad_requests_get_4xx_error_objects_and_the_server_stays_up() {
    suite("bad_requests.py", &["--ctx", "1024", "--api-key", "test-key", "--max-queue", "4"], Some("test-key"));
}

#[test]
fn schemathesis_fuzzing_finds_no_server_error() {
    // A small context keeps generated completions short.
    suite("fuzz.py", &["--ctx", "64", "--api-key", "fuzz-key"], Some("fuzz-key"));
}

/// (status, body) of an HTTP/1.0 POST (the server closes the connection after the answer).
fn post(url: &str, path: &str, body: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).expect("the server accepts connections");
    let head =
        format!("POST {path} HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n", body.len());
    stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes())).expect("request sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("answer read");
    let status = answer.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer.split_once("\r\n\r\n").map_or(String::new(), |(_, b)| b.to_string()))
}

/// The engine is written once over the backend: the server on wgpu (lavapipe in CI) answers a
/// chat completion and a stream. Needs no Python.
#[cfg(feature = "wgpu")]
#[test]
fn the_server_runs_on_wgpu_too() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(e) = ultra::Wgpu::new() {
        assert!(std::env::var("ULTRA_REQUIRE_WGPU").as_deref() != Ok("1"), "ULTRA_REQUIRE_WGPU=1 but {e}");
        eprintln!("SKIPPED: no wgpu adapter: {e}");
        return;
    }
    let server = Server::start(&["--backend", "wgpu", "--ctx", "256"]);
    let chat = r#"{"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 4"#;
    let (status, body) = post(&server.url, "/v1/chat/completions", &format!("{chat}}}"));
    assert_eq!(status, 200, "{body}");
    let value: serde_json::Value = serde_json::from_str(&body).expect("a JSON answer");
    assert_eq!(value["object"], "chat.completion");
    assert!(value["usage"]["completion_tokens"].as_u64().is_some_and(|n| (1..=4).contains(&n)), "{body}");
    let (status, body) = post(&server.url, "/v1/chat/completions", &format!("{chat}, \"stream\": true}}"));
    assert_eq!(status, 200, "{body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
}
