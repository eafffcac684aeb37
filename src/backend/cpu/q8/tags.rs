//! The formats of the int8 path as const tags, so that each SIMD kernel is compiled once per
//! format with its branches resolved (shared by avx512.rs and avx2.rs).

use super::{Code, Kind, Nibbles};

pub const Q4_0: u8 = 0;
pub const Q4_1: u8 = 1;
pub const Q5_0: u8 = 2;
pub const Q5_1: u8 = 3;
pub const Q8_0: u8 = 4;
pub const Q4_K: u8 = 14;
pub const Q5_K: u8 = 15;
pub const Q6_K: u8 = 16;

/// Tags 5.. are the 4-bit group-wise formats: 5 + 3·code + log2(G / 32).
pub const fn nibbles_tag(n: Nibbles) -> u8 {
    let code = match n.code {
        Code::Int4 => 0,
        Code::Nf4 => 1,
        Code::Nf4Dq => 2,
    };
    let log2_group = match n.group {
        32 => 0,
        64 => 1,
        _ => 2,
    };
    5 + 3 * code + log2_group
}

pub const fn kind_of(k: u8) -> Kind {
    match k {
        Q4_0 => Kind::Q4_0,
        Q4_1 => Kind::Q4_1,
        Q5_0 => Kind::Q5_0,
        Q5_1 => Kind::Q5_1,
        Q8_0 => Kind::Q8_0,
        Q4_K => Kind::Q4_K,
        Q5_K => Kind::Q5_K,
        Q6_K => Kind::Q6_K,
        _ => {
            let code = match (k - 5) / 3 {
                0 => Code::Int4,
                1 => Code::Nf4,
                _ => Code::Nf4Dq,
            };
            Kind::Nibbles(Nibbles { code, group: 32 << ((k - 5) % 3) })
        }
    }
}

/// `$m!(TAG)` with the const tag of `$kind`: every format of the int8 path, or with
/// `without_kquants` all but the k-quants (kernels of ISAs that have none for them; `q8::runs`
/// keeps them away).
macro_rules! dispatch {
    ($kind:expr, $m:ident) => {
        dispatch!(@ $kind, $m,
            Kind::Q4_K => $m!($crate::backend::cpu::q8::tags::Q4_K),
            Kind::Q5_K => $m!($crate::backend::cpu::q8::tags::Q5_K),
            Kind::Q6_K => $m!($crate::backend::cpu::q8::tags::Q6_K),
        )
    };
    ($kind:expr, $m:ident, without_kquants) => {
        dispatch!(@ $kind, $m,
            Kind::Q4_K | Kind::Q5_K | Kind::Q6_K => unreachable!("no k-quant kernels on this ISA (q8::runs)"),
        )
    };
    (@ $kind:expr, $m:ident, $($kquants:tt)*) => {
        match $kind {
            Kind::Q4_0 => $m!($crate::backend::cpu::q8::tags::Q4_0),
            Kind::Q4_1 => $m!($crate::backend::cpu::q8::tags::Q4_1),
            Kind::Q5_0 => $m!($crate::backend::cpu::q8::tags::Q5_0),
            Kind::Q5_1 => $m!($crate::backend::cpu::q8::tags::Q5_1),
            Kind::Q8_0 => $m!($crate::backend::cpu::q8::tags::Q8_0),
            $($kquants)*
            Kind::Nibbles(n) => match $crate::backend::cpu::q8::tags::nibbles_tag(n) {
                5 => $m!(5),
                6 => $m!(6),
                7 => $m!(7),
                8 => $m!(8),
                9 => $m!(9),
                10 => $m!(10),
                11 => $m!(11),
                12 => $m!(12),
                _ => $m!(13),
            },
        }
    };
}
pub(super) use dispatch;
