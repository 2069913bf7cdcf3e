//! Timing helpers shared by the bench binaries: medians over many samples, after a warm-up.

#![allow(dead_code)] // each bench uses its own subset

use std::time::{Duration, Instant};

/// The median of `samples`.
pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// The `p`th percentile of `samples` (nearest rank).
pub fn percentile(mut samples: Vec<Duration>, p: usize) -> Duration {
    samples.sort();
    let rank = (samples.len() * p).div_ceil(100).clamp(1, samples.len());
    samples[rank - 1]
}

/// Runs `f` a few times to warm up, then `samples` times, and returns the median duration.
pub fn measure(samples: usize, mut f: impl FnMut()) -> Duration {
    for _ in 0..samples.clamp(1, 50) {
        f();
    }
    median(
        (0..samples)
            .map(|_| {
                let start = Instant::now();
                f();
                start.elapsed()
            })
            .collect(),
    )
}

/// Prints one Markdown table row: `name`, its median and p90, the baseline's name, median and p90, and
/// the ratio of the medians.
pub fn row(name: &str, ours: &[Duration], baseline_name: &str, baseline: &[Duration]) {
    let (m, b) = (median(ours.to_vec()), median(baseline.to_vec()));
    println!(
        "| {name} | {m:.2?} | {:.2?} | {baseline_name} | {b:.2?} | {:.2?} | {:.2}× |",
        percentile(ours.to_vec(), 90),
        percentile(baseline.to_vec(), 90),
        m.as_secs_f64() / b.as_secs_f64()
    );
}
