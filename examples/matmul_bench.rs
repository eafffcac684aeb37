//! Times CPU matmul at SmolLM2-135M shapes and prints GFLOP/s (2·m·k·n flops per call).
//! Run: `cargo run --release --example matmul_bench`. A measurement, not a test.

use std::time::Instant;

use ultra::backend::{DType, HostBytes};
use ultra::{Backend, Cpu, Format};

/// Random blocks with a sane f16 scale (0.01) in every f16 header field.
fn weight_bytes(format: Format, rows: usize, cols: usize) -> Vec<u8> {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut bytes = Vec::new();
    for _ in 0..rows * cols / format.block_len() {
        let mut block: Vec<u8> = (0..format.block_bytes())
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        if format.is_quantized() {
            block[..2].copy_from_slice(&half::f16::from_f32(0.01).to_le_bytes());
            if matches!(format, Format::Q4_1 | Format::Q5_1) {
                block[2..4].copy_from_slice(&half::f16::from_f32(-0.05).to_le_bytes());
            }
        } else if format == Format::F32 {
            block.copy_from_slice(&0.01f32.to_le_bytes());
        }
        bytes.extend(block);
    }
    bytes
}

fn main() -> ultra::Result<()> {
    let cpu = Cpu::new();
    println!("rayon threads: {}", rayon::current_num_threads());
    for (format, k, n) in [(Format::Q4_1, 576, 1536), (Format::Q8_0, 576, 49152), (Format::F32, 576, 1536)] {
        let w = cpu.upload_weight(format, n, k, HostBytes::from_vec(weight_bytes(format, n, k)))?;
        for m in [1, 128] {
            let mut x = cpu.alloc(DType::F32, m, k)?;
            cpu.write_f32(&mut x, &(0..m * k).map(|i| (i % 7) as f32 * 0.1 - 0.3).collect::<Vec<_>>())?;
            let mut dst = cpu.alloc(DType::F32, m, n)?;
            cpu.matmul(&x, &w, &mut dst)?; // warm-up
            let flops = 2.0 * (m * k * n) as f64;
            // Best of 5 rounds: the machine may be shared, and the minimum is the least disturbed.
            let reps = ((4e8 / flops) as usize).clamp(2, 500);
            let mut secs = f64::INFINITY;
            for _ in 0..5 {
                let start = Instant::now();
                for _ in 0..reps {
                    cpu.matmul(&x, &w, &mut dst)?;
                }
                secs = secs.min(start.elapsed().as_secs_f64() / reps as f64);
            }
            println!(
                "matmul {:>4} m={m:<4} k={k} n={n:<6} {:8.3} ms  {:7.2} GFLOP/s",
                format.name(),
                secs * 1e3,
                flops / secs / 1e9
            );
        }
    }
    Ok(())
}
