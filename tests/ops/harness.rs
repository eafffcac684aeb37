//! Test machinery: a seeded PRNG, random inputs and quantized weights, tensor helpers, the
//! tolerance check with its failure report, and `check_family`, which runs a family's cases.

use half::{bf16, f16};
use ultra::backend::{DType, HostBytes, Tensor, Weight};
use ultra::quant::dequantize_row;
use ultra::quant::intn::Scheme;
use ultra::{Backend, Format};

use crate::cases::{self, Family, Tolerance};
use crate::run;

/// splitmix64, seeded from a case's name so adding a case never changes another's inputs.
pub struct Rng(u64);

impl Rng {
    pub fn from_name(name: &str) -> Rng {
        // FNV-1a.
        Rng(name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)))
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// U(lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let unit = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * unit
    }
    /// U{0, …, n - 1}.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn fill(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// A random `[rows, cols]` weight in ggml's bytes: floats from U(-1, 1); quantized blocks with
/// random f16 scale(s) (d ∈ ±[0.002, 0.03], min ∈ [-0.2, 0.2]) and random quant bits; k-quant
/// super-blocks with random bits but for their f16 scales.
pub fn random_weight(rng: &mut Rng, format: Format, rows: usize, cols: usize) -> Vec<u8> {
    let n_blocks = rows * cols / format.block_len();
    let mut bytes = Vec::with_capacity(n_blocks * format.block_bytes());
    for _ in 0..n_blocks {
        let x = rng.uniform(-1.0, 1.0);
        match format {
            Format::F32 => bytes.extend(x.to_le_bytes()),
            Format::F16 => bytes.extend(f16::from_f32(x).to_le_bytes()),
            Format::BF16 => bytes.extend(bf16::from_f32(x).to_le_bytes()),
            Format::Intn(f) => {
                // d (or absmax, D) of either sign; z within the levels (INT), 8-bit group scales (NF4_DQ).
                let sign = if rng.below(2) == 0 { -1.0 } else { 1.0 };
                bytes.extend(f16::from_f32(sign * rng.uniform(0.002, 0.03)).to_le_bytes());
                let levels = 1 << f.scheme.bits();
                bytes.extend(match f.scheme {
                    Scheme::Nf4 => [0, 0],
                    Scheme::Nf4Dq => [rng.below(256) as u8, rng.below(256) as u8],
                    _ => [rng.below(levels) as u8, 0],
                });
                bytes.extend((4..format.block_bytes()).map(|_| rng.next_u64() as u8));
            }
            _ if format.is_kquant() => {
                // Random quants and sub-block scales; the f16 super-block scale(s) in [0.001, 0.01].
                let start = bytes.len();
                bytes.extend((0..format.block_bytes()).map(|_| rng.next_u64() as u8));
                for field in format.fields().iter().filter(|f| f.name == "d" || f.name == "dm") {
                    for at in (start + field.start..start + field.end).step_by(2) {
                        bytes[at..at + 2].copy_from_slice(&f16::from_f32(rng.uniform(0.001, 0.01)).to_le_bytes());
                    }
                }
            }
            _ => {
                let sign = if rng.below(2) == 0 { -1.0 } else { 1.0 };
                bytes.extend(f16::from_f32(sign * rng.uniform(0.002, 0.03)).to_le_bytes());
                let mut header = 2;
                if matches!(format, Format::Q4_1 | Format::Q5_1) {
                    bytes.extend(f16::from_f32(rng.uniform(-0.2, 0.2)).to_le_bytes());
                    header = 4;
                }
                bytes.extend((header..format.block_bytes()).map(|_| rng.next_u64() as u8));
            }
        }
    }
    bytes
}

/// The f32 values of a weight, row by row, through the library's reference dequantizer.
pub fn dequantize(format: Format, bytes: &[u8], rows: usize, cols: usize) -> Vec<f32> {
    let mut values = vec![0.0; rows * cols];
    if cols > 0 {
        let row_bytes = format.row_bytes(cols).unwrap();
        for (dst, src) in values.chunks_exact_mut(cols).zip(bytes.chunks_exact(row_bytes)) {
            dequantize_row(format, src, dst);
        }
    }
    values
}

pub fn upload<B: Backend>(b: &B, format: Format, rows: usize, cols: usize, bytes: Vec<u8>) -> ultra::Result<Weight<B>> {
    b.upload_weight(format, rows, cols, HostBytes::from_vec(bytes))
}

pub fn f32_tensor<B: Backend>(b: &B, rows: usize, cols: usize, data: &[f32]) -> ultra::Result<Tensor<B>> {
    let mut t = b.alloc(DType::F32, rows, cols)?;
    b.write_f32(&mut t, data)?;
    Ok(t)
}

pub fn u32_tensor<B: Backend>(b: &B, rows: usize, cols: usize, data: &[u32]) -> ultra::Result<Tensor<B>> {
    let mut t = b.alloc(DType::U32, rows, cols)?;
    b.write_u32(&mut t, data)?;
    Ok(t)
}

pub fn read_f32<B: Backend>(b: &B, t: &Tensor<B>) -> ultra::Result<Vec<f32>> {
    let mut out = vec![0.0; t.len()];
    b.read_f32(t, &mut out)?;
    Ok(out)
}

pub fn read_u32<B: Backend>(b: &B, t: &Tensor<B>) -> ultra::Result<Vec<u32>> {
    let mut out = vec![0; t.len()];
    b.read_u32(t, &mut out)?;
    Ok(out)
}

pub fn widen(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

/// Ok, or a report: the measure that failed, the worst element, and the first few values.
pub fn compare(tolerance: Tolerance, expected: &[f64], actual: &[f64]) -> Result<(), String> {
    if expected.len() != actual.len() {
        return Err(format!("expected {} values, got {}", expected.len(), actual.len()));
    }
    let error = |i: usize| (actual[i] - expected[i]).abs();
    let (measure, pass, worst) = match tolerance {
        Tolerance::Exact => {
            let bad = (0..expected.len()).find(|&i| actual[i].to_bits() != expected[i].to_bits());
            ("bit-exact".to_string(), bad.is_none(), bad.unwrap_or(0))
        }
        Tolerance::Nmse(max) => {
            let num: f64 = (0..expected.len()).map(|i| error(i).powi(2)).sum();
            let den: f64 = expected.iter().map(|e| e * e).sum();
            let nmse = if den > 0.0 { num / den } else { num };
            let worst = (0..expected.len()).max_by(|&a, &b| error(a).total_cmp(&error(b))).unwrap_or(0);
            (format!("NMSE {nmse:.3e} (max {max:.0e})"), nmse <= max, worst)
        }
        Tolerance::RelAbs { rel, abs } => {
            let excess = |i: usize| error(i) - (abs + rel * expected[i].abs());
            let worst = (0..expected.len()).max_by(|&a, &b| excess(a).total_cmp(&excess(b))).unwrap_or(0);
            let pass = expected.is_empty() || excess(worst) <= 0.0;
            (format!("|err| ≤ {abs:e} + {rel:e}·|expected|"), pass, worst)
        }
        Tolerance::ExactThen { exact, rel, abs } => {
            let same = |i: usize| actual[i].to_bits() == expected[i].to_bits();
            let excess = |i: usize| if same(i) { 0.0 } else { error(i) - (abs + rel * expected[i].abs()) };
            let bad = (0..expected.len().min(exact)).find(|&i| !same(i));
            let worst = (exact.min(expected.len())..expected.len()).max_by(|&a, &b| excess(a).total_cmp(&excess(b)));
            // An excess of NaN (one side infinite, the other not) fails too.
            let pass = bad.is_none() && worst.is_none_or(|w| excess(w) <= 0.0);
            let measure = format!("first {exact} bit-exact, then |err| ≤ {abs:e} + {rel:e}·|expected|");
            (measure, pass, bad.or(worst).unwrap_or(0))
        }
    };
    if pass && actual.iter().all(|a| !a.is_nan()) {
        return Ok(());
    }
    let first: Vec<String> =
        (0..expected.len().min(5)).map(|i| format!("{:.6}/{:.6}", expected[i], actual[i])).collect();
    Err(format!(
        "{measure} failed; worst [{worst}]: expected {:.7}, actual {:.7}; first expected/actual: {}",
        expected.get(worst).copied().unwrap_or(f64::NAN),
        actual.get(worst).copied().unwrap_or(f64::NAN),
        first.join(", ")
    ))
}

/// Runs every case of `family` on `backend`; panics with one line per failing case.
/// The cases named by ULTRA_OPS_CASES (comma-separated parts of case names, e.g. `format=Q4_0,m=32`:
/// a case runs when its name contains every part), for a short run on a scarce device; all when unset.
/// Says loudly how many it left out, so a partial run is never read as the whole suite.
fn only_selected(cases: Vec<cases::Case>, family: Family) -> Vec<cases::Case> {
    let Ok(spec) = std::env::var("ULTRA_OPS_CASES") else { return cases };
    let parts: Vec<&str> = spec.split(',').filter(|p| !p.is_empty()).collect();
    let total = cases.len();
    let kept: Vec<_> = cases.into_iter().filter(|c| parts.iter().all(|p| c.op.to_string().contains(p))).collect();
    let msg = format!("ULTRA_OPS_CASES={spec}: {family:?} runs {} of {total} cases\n", kept.len());
    let _ = std::io::Write::write_all(&mut std::io::stderr(), msg.as_bytes()); // past the harness's capture
    kept
}

pub fn check_family<B: Backend + 'static>(backend: &B, family: Family) {
    let f16 = uses_f16(backend);
    let cases: Vec<_> = cases::all().into_iter().filter(|c| c.op.family() == family).collect();
    assert!(!cases.is_empty(), "no cases for {family:?}");
    let cases = only_selected(cases, family);
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let name = case.op.to_string();
            let mut rng = Rng::from_name(&name);
            let result = run::run(backend, &case.op, &mut rng);
            if cases::unsupported_on(backend.name(), &case.op) {
                return match result {
                    Err(ultra::Error::Unsupported { .. }) => None,
                    Err(err) => Some(format!("{name}: expected an Unsupported error, got: {err}")),
                    Ok(_) => Some(format!("{name}: expected an Unsupported error, but it ran")),
                };
            }
            let result = result.map_err(|err| format!("backend error: {err}"));
            let tolerance = cases::tolerance_on(tolerance_name(backend, &case.op), f16, case);
            let checked = result.and_then(|(expected, actual)| compare(tolerance, &expected, &actual));
            checked.err().map(|err| format!("{name} [{}]: {err}", case.why))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{family:?} on {}: {} failing case(s):\n{}",
        backend.name(),
        failures.len(),
        failures.join("\n")
    );
}

/// The name tolerance_on knows the backend by for `op`: the CPU's int8 path is `cpu_int8`, its AMX
/// path `cpu_amx` (or `cpu_int8` where AMX is off and that mode runs as int8); wgpu is `wgpu_int8`
/// for a matmul it runs on int8 activations.
fn tolerance_name<B: Backend + 'static>(backend: &B, op: &cases::Op) -> &'static str {
    use ultra::backend::cpu::{Activations, amx_runs};
    #[cfg(feature = "wgpu")]
    if let Some(w) = (backend as &dyn std::any::Any).downcast_ref::<ultra::Wgpu>() {
        let gemv = match *op {
            cases::Op::Matmul { format, m, k, n } | cases::Op::SiluMulMatmul { format, m, k, n } => {
                Some((format, m, k, n))
            }
            // Both parts' rows: the one dispatch's.
            cases::Op::NormMatmuls { format, m, k, n, .. } => Some((format, m, k, 2 * n + 3)),
            _ => None,
        };
        if gemv.is_some_and(|(format, m, k, n)| w.uses_int8_gemv(format, m, k, n)) {
            return "wgpu_int8";
        }
    }
    let _ = op;
    match (backend as &dyn std::any::Any).downcast_ref::<ultra::Cpu>().map(|cpu| cpu.activations()) {
        Some(Activations::Amx) if amx_runs() => "cpu_amx",
        Some(Activations::Int8 | Activations::Amx) => "cpu_int8",
        _ => backend.name(),
    }
}

fn uses_f16<B: Backend + 'static>(backend: &B) -> bool {
    #[cfg(feature = "wgpu")]
    if let Some(w) = (backend as &dyn std::any::Any).downcast_ref::<ultra::Wgpu>() {
        return w.uses_f16();
    }
    let _ = backend;
    false
}

/// The backend, or None after printing `SKIPPED: no <what> device: <reason>`; with `require`
/// (e.g. ULTRA_REQUIRE_CUDA) set to 1, a missing device fails the test instead.
#[allow(dead_code)]
pub fn or_skip<B: Backend>(what: &str, require: &str, made: ultra::Result<B>) -> Option<B> {
    match made {
        Ok(b) => Some(b),
        Err(e) => {
            let msg = format!("SKIPPED: no {what} device: {e}");
            assert!(std::env::var(require).as_deref() != Ok("1"), "{msg}");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), format!("{msg}\n").as_bytes()); // past the test harness's capture: a skip must be seen
            None
        }
    }
}

/// A wgpu backend whose quantized matmuls of m ≥ 64 run on cooperative matrices, or an error
/// saying the adapter has none (the suite then skips loudly; `ULTRA_REQUIRE_COOPMAT=1` fails).
#[cfg(feature = "wgpu")]
pub fn wgpu_coop(options: ultra::backend::wgpu::Options) -> ultra::Result<ultra::Wgpu> {
    let be = ultra::Wgpu::with_options(ultra::backend::wgpu::Options { coopmat: Some(true), ..options })?;
    match be.cooperative_matrices() {
        Some(_) => Ok(be),
        None => Err(ultra::Error::DeviceUnavailable {
            backend: "wgpu",
            reason: format!(
                "{} has no f16 × f16 → f32 cooperative matrices of side 8 or 16 with a fixed subgroup size",
                be.adapter_name()
            ),
        }),
    }
}
