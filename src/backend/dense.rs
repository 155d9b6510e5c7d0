//! faer-backed dense kernels for large dimensions: the decision set scored
//! as a matrix product (Y = V^{-1} X, then one column dot per action) and
//! the SPD inverse by faer's blocked Cholesky. Below the crossovers
//! ([`SCORE_GEMM_MIN_D`], [`INVERSE_FAER_MIN_D`], measured with
//! `fedbandits bench --linalg`, analysis/PERFORMANCE.md "faer crossover") the hand-written
//! kernels (the linear family's scorer, `algo::linear::cpu::score`, and
//! [`crate::linalg`]) are faster.
//!
//! Reproducibility: faer runs sequentially here (`Par::Seq`), so results do
//! not depend on the thread count or the batch layout. Its micro-kernels are
//! chosen at run time (without faer's `nightly` feature, AVX2+FMA on any
//! x86-64 that has it, else scalar), so above the crossover the last bits
//! of an inverse can differ on machines without AVX2, and they differ from
//! the hand-written factorization the CUDA kernels reproduce: CPU/GPU
//! parity is exact below the crossover (d < 32) and holds up to rounding in
//! the refactorizations above it.
//!
//! Workspace is allocated once per federation ([`DenseScratch`]); nothing
//! here allocates per step.

use crate::linalg::LltError;
use faer::dyn_stack::{MemBuffer, MemStack, StackReq};
use faer::linalg::cholesky::llt::{factor, inverse};
use faer::{Accum, MatMut, MatRef, Par};

/// Smallest d at which the decision set would be scored with faer's matrix
/// product: never, since the hand-written symmetric scorer was faster at
/// every d measured up to 256 (it does half the multiply-adds; K = 100, one
/// AVX2 core: 96 vs 167 us at d = 128, 521 vs 530 us at d = 256). The GEMM
/// scorer stays for the measurement (`bench --linalg`) and for machines
/// where it may win.
pub const SCORE_GEMM_MIN_D: usize = usize::MAX;
/// Smallest d at which inverses use faer's Cholesky (measured, one AVX2
/// core: hand-written 17.2 us vs faer 10.1 us at d = 32, 4.5 vs 5.5 us at
/// d = 16).
pub const INVERSE_FAER_MIN_D: usize = 32;

/// Workspace of the dense kernels for one dimension and K.
pub struct DenseScratch {
    d: usize,
    buf: MemBuffer,
    l: Vec<f64>,
    y: Vec<f64>,
    quad: Vec<f64>,
    mean: Vec<f64>,
}

impl Clone for DenseScratch {
    /// A fresh workspace of the same shape (its contents are scratch).
    fn clone(&self) -> Self {
        Self::new(self.d, self.quad.len())
    }
}

impl std::fmt::Debug for DenseScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DenseScratch(d = {})", self.d)
    }
}

impl DenseScratch {
    /// Workspace for dimension `d` and `kp` (padded) actions.
    pub fn new(d: usize, kp: usize) -> Self {
        let req = StackReq::any_of(&[
            factor::cholesky_in_place_scratch::<f64>(d, Par::Seq, Default::default()),
            inverse::inverse_scratch::<f64>(d, Par::Seq),
        ]);
        Self {
            d,
            buf: MemBuffer::new(req),
            l: vec![0.0; d * d],
            y: vec![0.0; d * kp],
            quad: vec![0.0; kp],
            mean: vec![0.0; kp],
        }
    }
}

/// Inverse and log det of the SPD matrix `v` (row-major d x d) into `inv`
/// (both triangles) by faer's Cholesky.
pub fn spd_inverse(v: &[f64], d: usize, inv: &mut [f64], s: &mut DenseScratch) -> Result<f64, LltError> {
    s.l[..d * d].copy_from_slice(&v[..d * d]);
    let stack = MemStack::new(&mut s.buf);
    let l = MatMut::from_column_major_slice_mut(&mut s.l[..d * d], d, d);
    factor::cholesky_in_place(l, Default::default(), Par::Seq, stack, Default::default()).map_err(|e| match e {
        factor::LltError::NonPositivePivot { index } => LltError { index, value: f64::NAN },
    })?;
    let mut logdet = 0.0;
    for j in 0..d {
        logdet += 2.0 * crate::math::ln(s.l[j * d + j]);
    }
    let l = MatRef::from_column_major_slice(&s.l[..d * d], d, d);
    let stack = MemStack::new(&mut s.buf);
    inverse::inverse(
        MatMut::from_column_major_slice_mut(&mut inv[..d * d], d, d),
        l,
        Par::Seq,
        stack,
    );
    // faer writes the lower triangle (column-major): mirror it.
    for j in 0..d {
        for i in j + 1..d {
            inv[i * d + j] = inv[j * d + i];
        }
    }
    if let Some(index) = inv[..d * d].iter().position(|x| !x.is_finite()) {
        return Err(LltError {
            index: index / d,
            value: f64::NAN,
        });
    }
    Ok(logdet)
}

/// Scores the column-major decision set `x` (d rows of `kp` actions) with
/// <theta, x> + beta sqrt(x^T A x) through Y = A X (faer), returning the
/// argmax (lowest index on ties) and its x^T A x.
pub fn score_argmax(
    d: usize,
    k: usize,
    x: &[f64],
    a: &[f64],
    theta: &[f64],
    beta: f64,
    s: &mut DenseScratch,
) -> (usize, f64) {
    let kp = x.len() / d.max(1);
    let xm = MatRef::from_row_major_slice(&x[..d * kp], d, kp);
    let am = MatRef::from_row_major_slice(&a[..d * d], d, d);
    let y = &mut s.y[..d * kp];
    faer::linalg::matmul::matmul(
        MatMut::from_row_major_slice_mut(y, d, kp),
        Accum::Replace,
        am,
        xm,
        1.0,
        Par::Seq,
    );
    let (quad, mean) = (&mut s.quad[..kp], &mut s.mean[..kp]);
    quad.fill(0.0);
    mean.fill(0.0);
    for j in 0..d {
        let (xr, yr, th) = (&x[j * kp..(j + 1) * kp], &y[j * kp..(j + 1) * kp], theta[j]);
        for a in 0..kp {
            quad[a] = xr[a].mul_add(yr[a], quad[a]);
            mean[a] = th.mul_add(xr[a], mean[a]);
        }
    }
    let (mut best, mut arm, mut bq) = (f64::NEG_INFINITY, 0, 0.0);
    for a in 0..k {
        let sc = beta.mul_add(quad[a].max(0.0).sqrt(), mean[a]);
        if sc > best {
            best = sc;
            arm = a;
            bq = quad[a];
        }
    }
    (arm, bq)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg;
    use crate::rng::Stream;

    #[test]
    fn faer_inverse_and_logdet_match_handwritten() {
        let mut s = Stream::new(&[21]);
        for d in [1usize, 3, 8, 33, 70] {
            let a = linalg::random_spd(d, &mut s);
            let mut scratch = DenseScratch::new(d, 8);
            let mut inv = vec![0.0; d * d];
            let ld = spd_inverse(&a, d, &mut inv, &mut scratch).unwrap();
            let (mut inv2, mut w) = (vec![0.0; d * d], vec![0.0; d * d]);
            let ld2 = linalg::spd_inverse(&a, d, &mut inv2, &mut w).unwrap();
            assert!((ld - ld2).abs() < 1e-10 * ld2.abs().max(1.0), "d={d}: {ld} vs {ld2}");
            for (x, y) in inv.iter().zip(&inv2) {
                assert!((x - y).abs() < 1e-10 * (1.0 + y.abs()), "d={d}");
            }
        }
        let mut bad = vec![0.0; 9];
        bad[0] = -1.0;
        assert!(spd_inverse(&bad, 3, &mut [0.0; 9], &mut DenseScratch::new(3, 8)).is_err());
    }
}
