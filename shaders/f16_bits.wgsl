// f16_bits  the f16 bits of an f32, rounded to nearest even, in integer arithmetic (joined in front of kv_write_f16 and
//           kv_write_q8)
// Launch    none (library text)
// Numerics  round to nearest even, overflow to ±inf, NaN stays NaN: the host's `half` bits on every driver

// The f16 bits of the f32 with bits b, rounded to nearest even. pack2x16float's rounding is the driver's
// choice, so it is not used.
fn f16_bits(b: u32) -> u32 {
    let sign = (b >> 16u) & 0x8000u;
    let a = b & 0x7fffffffu;
    if (a > 0x7f800000u) {
        return sign | 0x7e00u | ((a >> 13u) & 0x3ffu); // NaN stays NaN (quiet)
    }
    if (a >= 0x477ff000u) {
        return sign | 0x7c00u; // ≥ 65520 rounds to infinity
    }
    if (a >= 0x38800000u) {
        let r = a - 0x38000000u; // exponent rebiased from 127 to 15
        return sign | ((r + 0xfffu + ((r >> 13u) & 1u)) >> 13u);
    }
    if (a <= 0x33000000u) {
        return sign; // ≤ 2^-25 rounds to zero (2^-25 itself ties to the even 0)
    }
    // A subnormal half: the mantissa with its leading 1, shifted to units of 2^-24.
    let m = (a & 0x7fffffu) | 0x800000u;
    let shift = 126u - (a >> 23u);
    let h = m >> shift;
    let rem = m & ((1u << shift) - 1u);
    let tie = 1u << (shift - 1u);
    return sign | (h + select(0u, 1u, rem > tie || (rem == tie && (h & 1u) == 1u)));
}
