//! The host's copy of a GPU tensor's u32 values (ids, positions, slots, block tables: small), as
//! `write_u32` left them, so `check` can reject out-of-range indices before a launch without
//! waiting for the device. Both GPU backends keep one in every buffer.

use crate::backend::DType;

/// `Some(values)` while the host knows them; `None` for f32 tensors and once the device has
/// written the tensor (argmax, top_k outputs).
#[derive(Debug, Default)]
pub struct HostMirror(Option<Vec<u32>>);

impl HostMirror {
    /// The mirror of a fresh zero-filled tensor of `len` elements.
    pub fn new(dtype: DType, len: usize) -> HostMirror {
        HostMirror((dtype == DType::U32).then(|| vec![0; len]))
    }

    /// Records `data` written at the start of the tensor (the caller checked that it fits).
    pub fn record(&mut self, data: &[u32]) {
        if let Some(m) = &mut self.0 {
            m[..data.len()].copy_from_slice(data);
        }
    }

    /// The device writes the tensor from here on: the host no longer knows its values.
    pub fn forget(&mut self) {
        self.0 = None;
    }

    pub fn get(&self) -> Option<&[u32]> {
        self.0.as_deref()
    }
}
