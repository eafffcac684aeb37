//! The adaptive speculation window: grows k after rounds that accept every draft, shrinks it
//! after rounds that accept few, and turns speculation off while it does not pay, measured as
//! tokens per second of speculative rounds (drafting included) against plain decoding steps.
//! Each probe that still does not pay doubles the time off (a probe costs a draft model its
//! catch-up on the tokens it missed), so a draft that never pays costs little.

use std::time::Duration;

/// Exponential moving average weight of the newest observation.
const EMA: f64 = 0.25;
/// Plain steps to run while speculation is off before probing it again (doubled after each
/// probe that does not pay, up to `MAX_OFF_STEPS`).
const OFF_STEPS: usize = 16;
const MAX_OFF_STEPS: usize = 1024;

pub struct AdaptiveWindow {
    k: usize,
    k_min: usize,
    k_max: usize,
    adaptive: bool,
    spec_tok_s: Option<f64>,
    plain_tok_s: Option<f64>,
    off_for: usize,
    /// How long the next turn-off lasts.
    off_steps: usize,
}

impl AdaptiveWindow {
    /// A fixed window of `k` when `adaptive` is false; otherwise k moves within k_min..=k_max.
    pub fn new(k: usize, adaptive: bool, k_max: usize) -> AdaptiveWindow {
        let k_max = k_max.max(k).max(1);
        AdaptiveWindow {
            k,
            k_min: 1,
            k_max,
            adaptive,
            spec_tok_s: None,
            plain_tok_s: None,
            off_for: 0,
            off_steps: OFF_STEPS,
        }
    }

    /// Drafts to ask for this round; 0 means run a plain decoding step.
    pub fn k(&self) -> usize {
        if self.off_for > 0 { 0 } else { self.k }
    }

    fn ema(slot: &mut Option<f64>, value: f64) {
        *slot = Some(match *slot {
            None => value,
            Some(old) => old + EMA * (value - old),
        });
    }

    /// After a speculative round that proposed `drafted` and accepted `accepted`, taking `time`
    /// for `emitted` tokens.
    pub fn after_round(&mut self, drafted: usize, accepted: usize, emitted: usize, time: Duration) {
        if !self.adaptive {
            return;
        }
        Self::ema(&mut self.spec_tok_s, emitted as f64 / time.as_secs_f64().max(1e-9));
        if drafted > 0 && accepted == drafted {
            self.k = (self.k + 1).min(self.k_max);
        } else if accepted * 2 < drafted {
            self.k = self.k.saturating_sub(1).max(self.k_min);
        }
        if let (Some(spec), Some(plain)) = (self.spec_tok_s, self.plain_tok_s) {
            if spec < plain {
                self.off_for = self.off_steps;
                self.off_steps = (self.off_steps * 2).min(MAX_OFF_STEPS);
            } else {
                self.off_steps = OFF_STEPS;
            }
        }
    }

    /// After a plain decoding step that took `time`.
    pub fn after_plain_step(&mut self, time: Duration) {
        if !self.adaptive {
            return;
        }
        Self::ema(&mut self.plain_tok_s, 1.0 / time.as_secs_f64().max(1e-9));
        if self.off_for > 0 {
            self.off_for -= 1;
            if self.off_for == 0 {
                // Probe again from a small window; forget the old estimate so it can recover.
                self.k = self.k_min;
                self.spec_tok_s = None;
            }
        }
    }

    /// Before any measurement: one plain step gives the baseline to compare against.
    pub fn wants_baseline(&self) -> bool {
        self.adaptive && self.plain_tok_s.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_fixed_window_never_moves() {
        let mut w = AdaptiveWindow::new(4, false, 8);
        w.after_round(4, 0, 1, 100 * MS);
        w.after_plain_step(MS);
        assert_eq!(w.k(), 4);
        assert!(!w.wants_baseline());
    }

    #[test]
    fn the_window_grows_on_full_acceptance_and_shrinks_on_poor_acceptance() {
        let mut w = AdaptiveWindow::new(2, true, 4);
        w.after_plain_step(10 * MS); // baseline: 100 tok/s
        for _ in 0..5 {
            w.after_round(w.k(), w.k(), w.k() + 1, 10 * MS); // every draft accepted, fast
        }
        assert_eq!(w.k(), 4, "grows to k_max and stops there");
        w.after_round(4, 1, 2, 10 * MS);
        assert_eq!(w.k(), 3, "fewer than half accepted: shrink");
        for _ in 0..5 {
            w.after_round(w.k(), 0, 1, 5 * MS);
        }
        assert_eq!(w.k(), 1, "never below k_min");
    }

    #[test]
    fn speculation_turns_off_while_it_does_not_pay_then_probes_again() {
        let mut w = AdaptiveWindow::new(3, true, 8);
        assert!(w.wants_baseline());
        w.after_plain_step(10 * MS); // plain: 100 tok/s
        w.after_round(3, 0, 1, 30 * MS); // speculative: 33 tok/s
        assert_eq!(w.k(), 0, "slower than plain decoding: off");
        for _ in 0..OFF_STEPS - 1 {
            w.after_plain_step(10 * MS);
            assert_eq!(w.k(), 0);
        }
        w.after_plain_step(10 * MS);
        assert_eq!(w.k(), 1, "after OFF_STEPS plain steps it probes again from k_min");
        w.after_round(1, 1, 2, 5 * MS); // 400 tok/s: pays
        assert!(w.k() >= 1);
    }

    #[test]
    fn each_probe_that_does_not_pay_doubles_the_time_off() {
        let mut w = AdaptiveWindow::new(2, true, 4);
        w.after_plain_step(10 * MS); // plain: 100 tok/s
        for off in [OFF_STEPS, 2 * OFF_STEPS, 4 * OFF_STEPS] {
            w.after_round(w.k(), 0, 1, 30 * MS); // the probe: 33 tok/s
            let mut plain = 0;
            while w.k() == 0 {
                w.after_plain_step(10 * MS);
                plain += 1;
            }
            assert_eq!(plain, off, "off for {off} plain steps");
        }
        w.after_round(1, 1, 2, 5 * MS); // a probe that pays: back to the short period
        w.after_round(1, 0, 1, 30 * MS);
        w.after_round(1, 0, 1, 30 * MS);
        let mut plain = 0;
        while w.k() == 0 {
            w.after_plain_step(10 * MS);
            plain += 1;
        }
        assert!(plain <= 2 * OFF_STEPS, "{plain}");
    }
}
