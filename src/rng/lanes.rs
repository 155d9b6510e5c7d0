//! Eight xoshiro256++ generators in struct-of-arrays layout.
//!
//! The state is `[[u64; 8]; 4]` (word-major), so one call of [`Lanes::next`]
//! is four 8-wide vector operations on any CPU with 512-bit (or two 256-bit)
//! integer vectors. Lane `l` of `Lanes::new(key)` is exactly the scalar
//! xoshiro256++ stream of `key ++ [l]` (see the test against `rand_xoshiro`).

use super::state_words;

/// Number of lanes: one AVX-512 vector of u64.
pub const LANES: usize = 8;

/// Eight independent xoshiro256++ streams.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Lanes {
    s: [[u64; LANES]; 4],
}

impl Lanes {
    /// Lanes of the key `parts`; lane `l` is the stream of `parts ++ [l]`.
    pub fn new(parts: &[u64]) -> Self {
        let mut key = Vec::with_capacity(parts.len() + 1);
        key.extend_from_slice(parts);
        key.push(0);
        let mut s = [[0u64; LANES]; 4];
        for l in 0..LANES {
            *key.last_mut().expect("key has a lane slot") = l as u64;
            let w = state_words(&key);
            for (word, value) in s.iter_mut().zip(w) {
                word[l] = value;
            }
        }
        Self { s }
    }

    /// The state, word-major (for the intrinsics generator, which steps
    /// the lanes in vector registers).
    #[inline(always)]
    pub(crate) fn state_mut(&mut self) -> &mut [[u64; LANES]; 4] {
        &mut self.s
    }

    /// Advances all lanes and returns one output per lane.
    #[inline(always)]
    pub fn next_block(&mut self) -> [u64; LANES] {
        let [s0, s1, s2, s3] = &mut self.s;
        let mut out = [0u64; LANES];
        for l in 0..LANES {
            out[l] = s0[l].wrapping_add(s3[l]).rotate_left(23).wrapping_add(s0[l]);
            let t = s1[l] << 17;
            s2[l] ^= s0[l];
            s3[l] ^= s1[l];
            s1[l] ^= s2[l];
            s0[l] ^= s3[l];
            s2[l] ^= t;
            s3[l] = s3[l].rotate_left(45);
        }
        out
    }
}

/// Fills `out` with uniforms on [0, 1) (53 random bits each), eight per
/// lane step; a final partial step discards its unused draws.
#[inline(always)]
pub fn fill_uniforms(lanes: &mut Lanes, out: &mut [f64]) {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    // Stepped in a local copy, written back once (stepped behind the
    // reference, the state was reloaded with mixed-width loads at every
    // step; linear_gap's draw got about 5% faster).
    let mut st = lanes.clone();
    let (chunks, rest) = out.as_chunks_mut::<LANES>();
    for c in chunks {
        let w = st.next_block();
        for l in 0..LANES {
            c[l] = (w[l] >> 11) as f64 * SCALE;
        }
    }
    if !rest.is_empty() {
        let w = st.next_block();
        for (o, v) in rest.iter_mut().zip(w) {
            *o = (v >> 11) as f64 * SCALE;
        }
    }
    *lanes = st;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn uniforms_are_in_range_and_balanced() {
        let mut lanes = Lanes::new(&[3]);
        let mut u = vec![0.0; 100_003];
        fill_uniforms(&mut lanes, &mut u);
        assert!(u.iter().all(|v| (0.0..1.0).contains(v)));
        let mean = u.iter().sum::<f64>() / u.len() as f64;
        assert!(
            (mean - 0.5).abs() < 4.0 * (1.0f64 / 12.0 / u.len() as f64).sqrt(),
            "mean {mean}"
        );
    }

    #[test]
    fn lanes_equal_scalar_xoshiro_streams() {
        let key = [42u64, 9, 3];
        let mut lanes = Lanes::new(&key);
        let mut scalars: Vec<Stream> = (0..LANES as u64).map(|l| Stream::new(&[42, 9, 3, l])).collect();
        for _ in 0..1000 {
            let v = lanes.next_block();
            for l in 0..LANES {
                assert_eq!(v[l], scalars[l].next_u64());
            }
        }
    }
}
