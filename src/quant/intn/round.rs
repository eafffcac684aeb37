//! `f32::round` (half away from zero) without libm: on baseline x86-64, which has no rounding
//! instruction before SSE4.1, `f32::round` is a call to `roundf`, which keeps the quantizers'
//! level loops scalar (benches/notes/cpu.md).

/// `v.round()`, bit for bit (signed zeros and NaN included), as a truncating conversion and a
/// compare and selects, without branches, which the compiler inlines and vectorizes.
#[inline(always)]
pub(super) fn round(v: f32) -> f32 {
    let t = v as i32 as f32; // truncation, exact below 2^23 (larger values take the select below)
    let f = v - t; // exact there: t's bits are v's leading bits
    let r = (t + ((f >= 0.5) as i32 - (f <= -0.5) as i32) as f32).copysign(v); // round(-0.3) is -0.0
    // From 2^23 every f32 is an integer; NaN fails the compare and is returned as it is.
    if v.abs() < 8_388_608.0 { r } else { v }
}

#[cfg(test)]
mod tests {
    use super::round;

    #[test]
    fn matches_f32_round_bit_for_bit() {
        let edges = [0.5f32, -0.5, 0.49999997, -0.49999997, 1.5, 2.5, -2.5, 8_388_607.5, -8_388_607.5];
        let specials = [0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, f32::MIN_POSITIVE, 1e-45];
        for v in edges.into_iter().chain(specials) {
            assert_eq!(round(v).to_bits(), v.round().to_bits(), "{v:e}");
        }
        // Every 61st bit pattern: all exponents, both signs.
        for bits in (0..=u32::MAX).step_by(61) {
            let v = f32::from_bits(bits);
            let (a, b) = (round(v), v.round());
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{bits:#x}: {a:e} vs {b:e}");
        }
    }
}
