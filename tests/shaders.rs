//! Every wgpu kernel variant, assembled exactly as the backend compiles it, parses and validates
//! with naga: no GPU needed. Also checks that every file in shaders/ is joined into some variant
//! (found in the assembled sources, so no list of files is kept by hand).
#![cfg(feature = "wgpu")]

use ultra::backend::wgpu::kernels::Variant;

#[test]
fn every_kernel_variant_validates_with_naga() {
    let mut failures = Vec::new();
    for v in Variant::all() {
        let source = v.source();
        let module = match naga::front::wgsl::parse_str(&source) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{}: parse: {}", v.label(), e.emit_to_string(&source)));
                continue;
            }
        };
        let caps = naga::valid::Capabilities::all();
        let mut validator = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps);
        if let Err(e) = validator.validate(&module) {
            failures.push(format!("{}: validate: {}", v.label(), e.emit_to_string(&source)));
        }
        if !module.entry_points.iter().any(|e| e.name == v.kernel.stem()) {
            failures.push(format!("{}: no entry point `{}`", v.label(), v.kernel.stem()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_shader_file_is_used_and_has_a_header() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/shaders");
    let sources: Vec<String> = Variant::all().iter().map(Variant::source).collect();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(sources.iter().any(|s| s.contains(&text)), "shaders/{stem}.wgsl is not joined into any kernel");
        let header: Vec<&str> = text.lines().take(4).collect();
        assert!(
            header.len() == 4 && header.iter().all(|l| l.starts_with("//")),
            "shaders/{stem}.wgsl needs a 4-line header"
        );
    }
}
