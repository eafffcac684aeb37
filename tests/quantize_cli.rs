//! `ultra quantize` end to end on synthetic F16 models (`ultra synth`): our formats get their type
//! ids and `ultra.quant.version`, ggml's keep the standard ids (llama.cpp-readable), the kept roles
//! keep their bytes, every output loads and generates, and bad arguments fail with a clear error.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use ultra::Format;
use ultra::gguf::Gguf;

fn ultra(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ultra")).args(args).output().expect("the ultra binary runs")
}

fn ok(out: Output) -> Output {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!("ultra-quantize-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn quantize_writes_loadable_files() {
    let d = dir();
    let src = d.join("tiny-f16.gguf");
    ok(ultra(&["synth", "--preset", "tiny-256", "--type", "f16", "--out", s(&src)]));
    let source = Gguf::open(&src).unwrap();
    for (to, group) in
        [("int4", None), ("int8", Some("64")), ("nf4_dq", Some("32")), ("int2", None), ("q4_0", None), ("q4_k_m", None)]
    {
        let out = d.join(format!("{to}.gguf"));
        let mut args = vec!["quantize", "--model", s(&src), "--to", to, "--out", s(&out)];
        if let Some(g) = group {
            args.extend(["--group-size", g]);
        }
        let printed = String::from_utf8_lossy(&ok(ultra(&args)).stdout).into_owned();
        assert!(printed.contains("bits per weight"), "{printed}");
        let q = Gguf::open(&out).unwrap();
        let ours = to.starts_with("int") || to.starts_with("nf4");
        // From a float source our formats are quantized by GPTQ on the bundled text by default.
        assert_eq!(printed.contains("calibrated on"), ours, "{to}: {printed}");
        assert!(!ours || printed.contains(" 0 tensors by importance-weighted rounding"), "{to}: {printed}");
        assert!(!printed.contains(" 0 by GPTQ"), "{to}: {printed}");
        assert_eq!(q.get("ultra.quant.version").and_then(|v| v.as_u64()), ours.then_some(1), "{to}");
        for info in &q.tensors {
            let format = info.format().unwrap();
            let src_info = source.tensor(&info.name).unwrap();
            if info.rows() == 1 || info.name.starts_with("token_embd") || info.name == "output.weight" {
                // Vectors are copied; the kept roles, F16 in the source, take at most 8 bits' loss.
                let kept = info.rows() == 1 || matches!(format, Format::Q8_0 | Format::Intn(_) | Format::Q6_K);
                assert!(kept, "{to}: {} is {}", info.name, format.name());
                if info.rows() == 1 {
                    assert_eq!(q.tensor_bytes(info).bytes(), source.tensor_bytes(src_info).bytes(), "{}", info.name);
                }
            } else {
                assert_eq!(matches!(format, Format::Intn(_)), ours, "{to}: {} is {}", info.name, format.name());
                assert!(ours || info.type_id < 64, "{to}: ggml id {}", info.type_id);
            }
        }
        ok(ultra(&["generate", "--model", s(&out), "--prompt", "hello", "--max-tokens", "4"]));
    }
    // --no-calibrate rounds to nearest; --calibrate FILE takes another text (here 40 tokens of it).
    let out = d.join("nf4.gguf");
    let text = d.join("calibration.txt");
    std::fs::write(&text, "The quick brown fox jumps over the lazy dog. ".repeat(20)).unwrap();
    let base = ["quantize", "--model", s(&src), "--to", "nf4", "--out", s(&out)];
    let rtn = ok(ultra(&[&base[..], &["--no-calibrate"]].concat())).stdout;
    assert!(String::from_utf8_lossy(&rtn).contains("round-to-nearest"), "{}", String::from_utf8_lossy(&rtn));
    let file = ok(ultra(&[&base[..], &["--calibrate", s(&text), "--calibrate-tokens", "40"]].concat())).stdout;
    assert!(String::from_utf8_lossy(&file).contains("calibrated on 40 tokens"), "{}", String::from_utf8_lossy(&file));
    ok(ultra(&["generate", "--model", s(&out), "--prompt", "hello", "--max-tokens", "4"]));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn quantize_refuses_bad_arguments() {
    let d = dir().join("bad");
    std::fs::create_dir_all(&d).unwrap();
    let src = d.join("tiny.gguf");
    ok(ultra(&["synth", "--preset", "tiny-256", "--type", "f16", "--out", s(&src)]));
    let out = d.join("out.gguf");
    for (args, expect) in [
        (vec!["--to", "int5"], "unknown format"),
        (vec!["--to", "int4", "--group-size", "48"], "group sizes are 32, 64 and 128"),
        (vec!["--to", "q4_0", "--group-size", "64"], "applies to"),
        (vec!["--to", "int4", "--keep", "lm_head"], "not a role"),
        (vec!["--to", "int4", "--calibrate", "/nonexistent/text"], "reading /nonexistent/text"),
    ] {
        let mut all = vec!["quantize", "--model", s(&src), "--out", s(&out)];
        all.extend(args);
        let r = ultra(&all);
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(!r.status.success() && err.contains(expect), "{all:?}: {err}");
    }
    std::fs::remove_dir_all(&d).ok();
}
