//! The adaptive speculation window: a cost model picks the window k, or turns speculation off,
//! from measured times: a plain decoding step (p), a drafted token (d), each verified row past
//! the first (s), and the acceptance rate α. A window of k emits E(k) = (1 - α^(k+1)) / (1 - α)
//! tokens per target pass (geometric acceptance) in k·d + p + k·s, so speculating pays while
//! (k·d + p + k·s) / E(k) < p; the window takes the k that minimises that time per token.
//!
//! A draft model is timed with one decoding step before it is caught up on the prompt, and it is
//! caught up (one batched pass over what it missed) only when the time the model expects to save
//! over the tokens still to come exceeds that catch-up's cost: a draft that costs about what the
//! target does is never caught up, so it costs one step. Each probe after a time off drafts one
//! token, and each probe that does not pay doubles the time off.
//!
//! No clock is read here: callers pass durations, so the tests inject them.

use std::time::Duration;

/// Exponential moving average weight of the newest observation.
const EMA: f64 = 0.25;
/// Acceptance assumed before any is measured (a good draft's), and its weight in drafts.
const PRIOR_ACCEPTANCE: f64 = 0.8;
const PRIOR_WEIGHT: f64 = 4.0;
/// Weight kept by older acceptance counts at each round, and at the end of a time off (which
/// pulls the estimate back toward the prior, so a text that became predictable is noticed).
const DECAY: f64 = 0.9;
const DECAY_OFF: f64 = 0.5;
/// Plain steps to run while speculation is off before probing it again (doubled after each
/// probe that does not pay, up to `MAX_OFF_STEPS`).
const OFF_STEPS: usize = 16;
const MAX_OFF_STEPS: usize = 1024;
/// Plain steps before the first probe; their median is the first estimate of p (one step after
/// a prefill, or on a busy machine, can be far slower or faster than the rest).
const BASELINE_STEPS: usize = 3;
/// Tokens a drafter may lag behind the context and still draft in one step: the last accepted
/// draft and the verifier's own token of a round that accepted every draft.
pub const IN_STEP: usize = 2;

/// What the next round does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A plain decoding step.
    Plain,
    /// Time one decoding step of the draft model (the first token it has not seen), then a
    /// plain step.
    TimeDraft,
    /// Draft up to k tokens and verify them.
    Speculate(usize),
}

/// The measured times of one speculative round.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    pub drafted: usize,
    pub accepted: usize,
    /// Drafting, the catch-up of a draft model excluded.
    pub draft: Duration,
    /// The target's pass over the pending token and the drafts, and the verification.
    pub verify: Duration,
}

pub struct AdaptiveWindow {
    k: usize,
    k_max: usize,
    adaptive: bool,
    /// Seconds: a plain step, a drafted token, a verified row past the first, a prompt token
    /// of the target's prefill (a catch-up costs about that, scaled by d / p).
    plain: Option<f64>,
    baseline: [f64; BASELINE_STEPS],
    plain_steps: usize,
    draft: Option<f64>,
    extra_row: Option<f64>,
    prefill_token: Option<f64>,
    /// Decayed counts: drafts accepted, and rounds that ended in a rejection.
    accepted: f64,
    rejected: f64,
    off_for: usize,
    /// How long the next turn-off lasts.
    off_steps: usize,
    /// The next round starts speculation (at the start or after a time off): it must pass the
    /// cost model's gate first.
    probing: bool,
}

impl AdaptiveWindow {
    /// A fixed window of `k` when `adaptive` is false; otherwise k moves within 1..=k_max.
    pub fn new(k: usize, adaptive: bool, k_max: usize) -> AdaptiveWindow {
        AdaptiveWindow {
            k: if adaptive { 1 } else { k },
            k_max: k_max.max(k).max(1),
            adaptive,
            plain: None,
            baseline: [0.0; BASELINE_STEPS],
            plain_steps: 0,
            draft: None,
            extra_row: None,
            prefill_token: None,
            accepted: 0.0,
            rejected: 0.0,
            off_for: 0,
            off_steps: OFF_STEPS,
            probing: true,
        }
    }

    /// The next round, for a drafter `behind` tokens behind the context with `remaining`
    /// tokens left to generate.
    pub fn next(&mut self, behind: usize, remaining: usize) -> Step {
        if !self.adaptive {
            return Step::Speculate(self.k);
        }
        let Some(p) = self.plain else { return Step::Plain };
        if self.off_for > 0 || self.plain_steps < BASELINE_STEPS {
            return Step::Plain;
        }
        if self.probing {
            if behind > IN_STEP && self.draft.is_none() {
                return Step::TimeDraft;
            }
            if !self.probe_pays(p, behind, remaining) {
                self.turn_off();
                return Step::Plain;
            }
        }
        Step::Speculate(self.k)
    }

    /// The target's prefill of `tokens` prompt tokens took `time`.
    pub fn after_prefill(&mut self, tokens: usize, time: Duration) {
        if tokens > 0 {
            self.prefill_token = Some(time.as_secs_f64() / tokens as f64);
        }
    }

    /// After a plain decoding step that took `time`.
    pub fn after_plain_step(&mut self, time: Duration) {
        if !self.adaptive {
            return;
        }
        let t = time.as_secs_f64();
        if self.plain_steps < BASELINE_STEPS {
            self.baseline[self.plain_steps] = t;
            let mut seen = self.baseline[..=self.plain_steps].to_vec();
            seen.sort_by(f64::total_cmp);
            self.plain = Some(seen[seen.len() / 2]);
        } else {
            ema(&mut self.plain, t);
        }
        self.plain_steps += 1;
        if self.off_for > 0 {
            self.off_for -= 1;
            if self.off_for == 0 {
                self.k = 1;
                self.probing = true;
                self.accepted *= DECAY_OFF;
                self.rejected *= DECAY_OFF;
            }
        }
    }

    /// After one decoding step of the draft model (`Step::TimeDraft`) that took `time`.
    pub fn after_draft_step(&mut self, time: Duration) {
        ema(&mut self.draft, time.as_secs_f64());
    }

    /// After a speculative round.
    pub fn after_round(&mut self, round: Round) {
        if !self.adaptive || round.drafted == 0 {
            return;
        }
        let p = self.plain.unwrap_or(round.verify.as_secs_f64());
        ema(&mut self.draft, round.draft.as_secs_f64() / round.drafted as f64);
        ema(&mut self.extra_row, (round.verify.as_secs_f64() - p).max(0.0) / round.drafted as f64);
        self.accepted = DECAY * self.accepted + round.accepted as f64;
        self.rejected = DECAY * self.rejected + f64::from(u8::from(round.accepted < round.drafted));
        self.probing = false;
        let (k, per_token) = self.best(p);
        if per_token > p {
            self.turn_off();
        } else {
            self.off_steps = OFF_STEPS;
            // Acceptance runs in streaks (a copied passage): a round that took every draft
            // doubles the window, as far as the model allows at all.
            let full = round.accepted == round.drafted;
            self.k = if full { k.max(2 * self.k).min(self.k_max) } else { k.min(2 * self.k) };
        }
    }

    fn acceptance(&self) -> f64 {
        let a = (self.accepted + PRIOR_ACCEPTANCE * PRIOR_WEIGHT) / (self.accepted + self.rejected + PRIOR_WEIGHT);
        a.min(0.999)
    }

    /// The window with the least expected time per emitted token, and that time.
    fn best(&self, p: f64) -> (usize, f64) {
        let (d, s, a) = (self.draft.unwrap_or(0.0), self.extra_row.unwrap_or(0.0), self.acceptance());
        (1..=self.k_max)
            .map(|k| {
                let emitted = (1.0 - a.powi(k as i32 + 1)) / (1.0 - a);
                (k, (k as f64 * (d + s) + p) / emitted)
            })
            .fold((1, f64::INFINITY), |best, x| if x.1 < best.1 { x } else { best })
    }

    /// Whether starting speculation is expected to save more over `remaining` tokens than a
    /// drafter `behind` tokens behind costs to catch up.
    fn probe_pays(&self, p: f64, behind: usize, remaining: usize) -> bool {
        let saved = remaining as f64 * (p - self.best(p).1);
        let d = self.draft.unwrap_or(0.0);
        let catch_up = behind.saturating_sub(IN_STEP) as f64 * self.prefill_token.unwrap_or(p) * d / p;
        saved > catch_up
    }

    fn turn_off(&mut self) {
        self.off_for = self.off_steps;
        self.off_steps = (self.off_steps * 2).min(MAX_OFF_STEPS);
    }
}

fn ema(slot: &mut Option<f64>, value: f64) {
    *slot = Some(match *slot {
        None => value,
        Some(old) => old + EMA * (value - old),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn round(drafted: usize, accepted: usize, draft: Duration, verify: Duration) -> Round {
        Round { drafted, accepted, draft, verify }
    }

    /// The baseline's plain steps, the first slower than the rest.
    fn baseline(w: &mut AdaptiveWindow, behind: usize, remaining: usize) {
        for i in 0..BASELINE_STEPS {
            assert_eq!(w.next(behind, remaining), Step::Plain, "baseline step {i}");
            w.after_plain_step(if i == 0 { 50 * MS } else { 10 * MS });
        }
    }

    /// Plain steps until speculation is due again (at most `limit`).
    fn plain_until_on(w: &mut AdaptiveWindow, behind: usize, remaining: usize, limit: usize) -> usize {
        let mut n = 0;
        while n < limit && !matches!(w.next(behind, remaining), Step::Speculate(_)) {
            w.after_plain_step(10 * MS);
            n += 1;
        }
        n
    }

    #[test]
    fn a_fixed_window_never_moves() {
        let mut w = AdaptiveWindow::new(4, false, 8);
        assert_eq!(w.next(100, 100), Step::Speculate(4), "no baseline, no timing of the draft");
        w.after_round(round(4, 0, 100 * MS, 100 * MS));
        w.after_plain_step(MS);
        assert_eq!(w.next(100, 100), Step::Speculate(4));
    }

    #[test]
    fn a_cheap_draft_grows_the_window_while_it_is_accepted_and_shrinks_it_when_not() {
        let mut w = AdaptiveWindow::new(4, true, 16);
        baseline(&mut w, 0, 100);
        assert_eq!(w.plain, Some(0.010), "the median baseline step");
        assert_eq!(w.next(0, 100), Step::Speculate(1), "the first probe drafts one token");
        let mut k = 1;
        for _ in 0..8 {
            w.after_round(round(k, k, Duration::ZERO, 11 * MS)); // all accepted, verify ~ a plain step
            let Step::Speculate(next) = w.next(0, 100) else { panic!("speculation pays") };
            assert!(next >= (2 * k).min(16), "every draft accepted: at least doubles ({k} -> {next})");
            k = next;
        }
        assert!(k >= 8, "k = {k}");
        for _ in 0..12 {
            w.after_round(round(k, 0, Duration::ZERO, 11 * MS + k as u32 * MS));
            match w.next(0, 100) {
                Step::Speculate(next) => k = next,
                _ => break,
            }
        }
        assert!(k < 8 || w.next(0, 100) == Step::Plain, "nothing accepted: a smaller window or off (k = {k})");
    }

    #[test]
    fn a_draft_that_costs_a_plain_step_is_timed_once_and_never_caught_up() {
        let mut w = AdaptiveWindow::new(4, true, 16);
        w.after_prefill(40, 40 * MS); // 1 ms a prompt token
        baseline(&mut w, 41, 127);
        assert_eq!(w.next(41, 126), Step::TimeDraft, "timed before any catch-up");
        w.after_draft_step(10 * MS);
        w.after_plain_step(10 * MS);
        for step in 0..120 {
            assert_ne!(w.next(42 + step, 120 - step), Step::TimeDraft, "timed once");
            assert_eq!(w.next(42 + step, 120 - step), Step::Plain, "step {step}: it cannot pay");
            w.after_plain_step(10 * MS);
        }
    }

    #[test]
    fn a_catch_up_is_paid_only_when_the_tokens_left_can_repay_it() {
        // A draft at a fifth of a plain step's cost; a prompt token's prefill costs a tenth.
        let timed = |behind: usize, remaining: usize| {
            let mut w = AdaptiveWindow::new(4, true, 16);
            w.after_prefill(100, 100 * MS);
            baseline(&mut w, behind, remaining);
            assert_eq!(w.next(behind, remaining), Step::TimeDraft);
            w.after_draft_step(2 * MS);
            w.after_plain_step(10 * MS);
            w.next(behind, remaining)
        };
        assert_eq!(timed(40, 120), Step::Speculate(1), "40 tokens to catch up, 120 to gain on");
        assert_eq!(timed(4000, 120), Step::Plain, "4000 tokens to catch up: not repaid in 120");
        assert_eq!(timed(4000, 100_000), Step::Speculate(1), "but repaid in 100000");
    }

    /// Rounds of one rejected draft (cheap to draft, verification half a plain step dearer)
    /// until the window turns off; returns how many it took.
    fn reject_until_off(w: &mut AdaptiveWindow) -> usize {
        let mut n = 0;
        while let Step::Speculate(k) = w.next(0, 10_000) {
            w.after_round(round(k, 0, k as u32 * MS, 10 * MS + 5 * k as u32 * MS));
            n += 1;
            assert!(n < 100, "never turned off");
        }
        n
    }

    #[test]
    fn speculation_turns_off_while_it_does_not_pay_then_probes_again_with_one_draft() {
        let mut w = AdaptiveWindow::new(3, true, 8);
        baseline(&mut w, 0, 10_000);
        assert_eq!(w.next(0, 10_000), Step::Speculate(1), "a model-free drafter is probed at once");
        assert!(reject_until_off(&mut w) <= 3, "turns off after a few rejections");
        assert_eq!(plain_until_on(&mut w, 0, 10_000, 10_000), OFF_STEPS, "off for OFF_STEPS plain steps");
        assert_eq!(w.next(0, 10_000), Step::Speculate(1), "the probe drafts one token");
    }

    #[test]
    fn each_probe_that_does_not_pay_doubles_the_time_off() {
        let mut w = AdaptiveWindow::new(2, true, 4);
        baseline(&mut w, 0, 10_000);
        reject_until_off(&mut w);
        for off in [OFF_STEPS, 2 * OFF_STEPS, 4 * OFF_STEPS] {
            assert_eq!(plain_until_on(&mut w, 0, 10_000, 10_000), off, "off for {off} plain steps");
            assert_eq!(reject_until_off(&mut w), 1, "one probe");
        }
        plain_until_on(&mut w, 0, 10_000, 10_000);
        for _ in 0..4 {
            w.after_round(round(1, 1, Duration::ZERO, 10 * MS)); // probes that pay
        }
        assert!(matches!(w.next(0, 10_000), Step::Speculate(_)));
        reject_until_off(&mut w);
        assert_eq!(plain_until_on(&mut w, 0, 10_000, 10_000), OFF_STEPS, "back to the short period");
    }

    #[test]
    fn the_expected_tokens_per_pass_follow_the_acceptance_rate() {
        let mut w = AdaptiveWindow::new(4, true, 16);
        for _ in 0..50 {
            w.after_round(round(4, 2, Duration::ZERO, 10 * MS)); // 2 of 4, then a rejection
        }
        assert!((w.acceptance() - 2.0 / 3.0).abs() < 0.02, "{}", w.acceptance());
        // Free drafts and free extra rows: the longest window wins.
        assert_eq!(w.best(0.01).0, 16);
    }
}
