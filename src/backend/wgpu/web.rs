//! What the wgpu backend needs in a page (wasm32): a one-shot channel from wgpu's map callback,
//! which the browser runs in a later turn of the event loop, to the read that awaits it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

#[derive(Default)]
struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    /// The sender was dropped unsent (wgpu dropped the callback: the device is gone).
    closed: bool,
}

pub struct Sender<T>(Arc<Mutex<Slot<T>>>);
pub struct Receiver<T>(Arc<Mutex<Slot<T>>>);

/// A channel for one value.
pub fn oneshot<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot { value: None, waker: None, closed: false }));
    (Sender(slot.clone()), Receiver(slot))
}

fn lock<T>(slot: &Mutex<Slot<T>>) -> std::sync::MutexGuard<'_, Slot<T>> {
    slot.lock().unwrap_or_else(|p| p.into_inner())
}

impl<T> Sender<T> {
    pub fn send(self, value: T) {
        lock(&self.0).value = Some(value);
        // Drop wakes the receiver.
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let mut slot = lock(&self.0);
        slot.closed = true;
        if let Some(w) = slot.waker.take() {
            w.wake();
        }
    }
}

impl<E: std::fmt::Display> Future for Receiver<Result<(), E>> {
    /// The callback's result, its error as text; "dropped" if the callback never ran.
    type Output = Result<(), String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock(&self.0);
        match slot.value.take() {
            Some(r) => Poll::Ready(r.map_err(|e| e.to_string())),
            None if slot.closed => Poll::Ready(Err("the device dropped the buffer map".into())),
            None => {
                slot.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}
