//! Sampling ops on the CPU: greedy argmax per row.

use rayon::prelude::*;

use crate::backend::{Tensor, expect_shape};
use crate::error::{Error, Result};

use super::Cpu;
use super::buffer::{f32s, u32s_mut};

/// See [`crate::Backend::argmax`].   x: [rows, vocab]; dst: u32 [rows, 1]
/// The first maximum wins (lowest index on ties); NaN never compares greater.
pub fn argmax(x: &Tensor<Cpu>, dst: &mut Tensor<Cpu>) -> Result<()> {
    let op = "argmax";
    let vocab = x.cols;
    expect_shape(op, dst, x.rows, 1)?;
    if vocab == 0 || u32::try_from(vocab - 1).is_err() {
        return Err(Error::InvalidArgument(format!("argmax: rows of {vocab} values have no u32 argmax")));
    }
    let (x, dst) = (f32s(op, x)?, u32s_mut(op, dst)?);
    dst.par_iter_mut().zip(x.par_chunks(vocab)).for_each(|(best, row)| {
        let mut best_j = 0;
        for (j, &v) in row.iter().enumerate().skip(1) {
            if v > row[best_j] {
                best_j = j;
            }
        }
        *best = best_j as u32;
    });
    Ok(())
}
