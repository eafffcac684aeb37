//! cudarc's driver errors as this crate's `Error`, at the backend boundary (a leaf module: every
//! CUDA file may use it).

use cudarc::driver::DriverError;

use crate::error::Error;

pub fn driver(e: DriverError) -> Error {
    Error::Device { backend: "cuda", detail: e.to_string() }
}
