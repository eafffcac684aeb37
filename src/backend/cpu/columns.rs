//! The output of a parallel matmul: `dst` shared by the rayon tasks, each of which writes only
//! its own columns (matmul.rs and the int8 path in q8/ both write through it).

/// `dst` shared by the tasks; each task writes only its own columns.
pub struct Columns {
    ptr: *mut f32,
    len: usize,
}

// SAFETY: tasks write disjoint elements (distinct column tiles), and `dst` outlives the parallel
// loop that uses this handle (the loop finishes before `matmul` returns).
unsafe impl Sync for Columns {}

impl Columns {
    pub fn new(dst: &mut [f32]) -> Columns {
        Columns { ptr: dst.as_mut_ptr(), len: dst.len() }
    }

    /// # Safety
    /// No other thread may access element `i` while this call runs, and the slice given to
    /// [`Columns::new`] must outlive every call.
    pub unsafe fn write(&self, i: usize, value: f32) {
        assert!(i < self.len, "matmul: output index out of range");
        // SAFETY: in bounds (checked above); exclusive per the caller's contract.
        unsafe { self.ptr.add(i).write(value) };
    }

    /// Where a 16 × 16 block of a row-major [_, stride] dst starts (row i, column j), for a store
    /// that writes the block directly (the AMX tile unit's `tilestored`).
    ///
    /// # Safety
    /// As [`Columns::write`], for every element of the block while the pointer is used.
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    pub unsafe fn block_ptr(&self, i: usize, j: usize, stride: usize) -> *mut f32 {
        let end = (i + 15).checked_mul(stride).and_then(|e| e.checked_add(j + 16));
        assert!(j + 16 <= stride && end.is_some_and(|end| end <= self.len), "matmul: output block out of range");
        // SAFETY: in bounds (checked above).
        unsafe { self.ptr.add(i * stride + j) }
    }

    /// Elements i..i + values.len() = values.
    ///
    /// # Safety
    /// As [`Columns::write`], for each of those elements.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the panel GEMM's (AVX-512 only)
    pub unsafe fn write_run(&self, i: usize, values: &[f32]) {
        assert!(i.checked_add(values.len()).is_some_and(|end| end <= self.len), "matmul: output index out of range");
        // SAFETY: in bounds (checked above); exclusive per the caller's contract.
        unsafe { self.ptr.add(i).copy_from_nonoverlapping(values.as_ptr(), values.len()) };
    }

    /// Elements i..i + 16 = values: one 64-byte store. (A run of variable length, even when 16,
    /// became a `memcpy` call, with `vzeroupper` and vector spills around it, in the panel GEMM's
    /// loop; benches/notes/cpu.md.)
    ///
    /// # Safety
    /// As [`Columns::write`], for each of those elements.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // the panel GEMM's (AVX-512 only)
    pub unsafe fn write16(&self, i: usize, values: &[f32; 16]) {
        assert!(i.checked_add(16).is_some_and(|end| end <= self.len), "matmul: output index out of range");
        // SAFETY: in bounds (checked above); exclusive per the caller's contract.
        unsafe { self.ptr.add(i).cast::<[f32; 16]>().write_unaligned(*values) };
    }
}
