//! The instruction set the fused quantized kernels (`kquant`, `intn`) take on this CPU:
//! AVX-512 where present, else AVX2 + FMA (both bit-identical), else none (the generic path).

#[derive(Clone, Copy, PartialEq, Debug)]
pub(super) enum Isa {
    Avx512,
    Avx2,
}

/// Which kernels run: AVX-512 where present, else AVX2 (both bit-identical).
pub(super) fn isa() -> Option<Isa> {
    if *super::avx512::AVAILABLE {
        Some(Isa::Avx512)
    } else if super::isa::avx2_fma() {
        Some(Isa::Avx2)
    } else {
        None
    }
}
