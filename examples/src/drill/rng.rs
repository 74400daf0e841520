//! [`SplitMix64`]: the drill's seeded random numbers.
//!
//! A fixed, dependency-free generator rather than `rand`'s `StdRng`: `StdRng` documents that its
//! algorithm may change between `rand` versions, and the drill's promise is that the same
//! `--seed` offers the same load to every layout, today and after a dependency update.

/// Sebastiano Vigna's SplitMix64: 64 bits of state, statistically good enough for a load
/// generator, and the same sequence for the same seed on every platform.
///
/// ```
/// use resilience_examples::drill::SplitMix64;
///
/// let mut a = SplitMix64::for_stream(42, 7);
/// let mut b = SplitMix64::for_stream(42, 7);
/// assert_eq!(a.next_u64(), b.next_u64());
/// let x = a.uniform(10.0, 20.0);
/// assert!((10.0..20.0).contains(&x));
/// ```
#[derive(Clone, Debug)]
pub struct SplitMix64 {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl SplitMix64 {
    /// A generator starting from `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The generator of stream `index` under `seed` (one per simulated caller): streams of
    /// the same seed are unrelated to one another, and each is the same on every run.
    pub fn for_stream(seed: u64, index: u64) -> Self {
        let mut mixer = SplitMix64::new(seed ^ index.wrapping_mul(GOLDEN_GAMMA).rotate_left(17));
        // Two rounds so that neighbouring indices start far apart.
        let first = mixer.next_u64();
        SplitMix64::new(first ^ mixer.next_u64().rotate_left(29))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `[0, 1)`, with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// A number in `[low, high)`.
    pub fn uniform(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.next_f64()
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_sequence_of_seed_zero() {
        // The first outputs of SplitMix64 seeded with 0, as published with the algorithm.
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(rng.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn streams_differ_and_stay_in_range() {
        let a: Vec<u64> = (0..4)
            .map(|i| SplitMix64::for_stream(1, i).next_u64())
            .collect();
        for i in 0..a.len() {
            for j in 0..i {
                assert_ne!(a[i], a[j]);
            }
        }
        let mut rng = SplitMix64::new(3);
        let mean = (0..10_000).map(|_| rng.next_f64()).sum::<f64>() / 10_000.0;
        assert!((0.48..0.52).contains(&mean), "{mean}");
    }
}
