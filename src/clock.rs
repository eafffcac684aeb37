//! The clock generation timings read: std's `Instant` natively; on the web, where std has no
//! clock (wasm32-unknown-unknown), the page's `Date.now()` in milliseconds.

#[cfg(not(target_arch = "wasm32"))]
pub use std::time::Instant;

#[cfg(target_arch = "wasm32")]
pub use web::Instant;

#[cfg(target_arch = "wasm32")]
mod web {
    use std::time::Duration;

    /// A point in time, in milliseconds since the epoch (millisecond resolution).
    #[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
    pub struct Instant(f64);

    impl Instant {
        pub fn now() -> Instant {
            Instant(js_sys::Date::now())
        }
        pub fn elapsed(&self) -> Duration {
            Duration::from_secs_f64(((js_sys::Date::now() - self.0) / 1e3).max(0.0))
        }
    }
}
