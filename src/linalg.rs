//! Small dense linear algebra on row-major `d x d` slices.
//!
//! The engine's matrices are tiny (d = 5..128) and there are millions of them,
//! so these are plain loops with no allocation: callers pass workspace. faer's
//! own documentation says it is not tuned for very small matrices, and for a
//! d = 10 Cholesky the call overhead dominates; for d up to 128 these loops run
//! only at syncs and refactorizations, never per step.
//!
//! A numerical failure is a value ([`LltError`]), never a panic.

use thiserror::Error;

/// Cholesky failure: the matrix is not (numerically) positive definite.
#[derive(Debug, Clone, Copy, Error, PartialEq)]
#[error("matrix is not positive definite: pivot {index} is {value:e}")]
pub struct LltError {
    /// Row of the first non-positive pivot.
    pub index: usize,
    /// The pivot's value.
    pub value: f64,
}

/// A fixed-length buffer of f64 whose first element sits on a 64-byte
/// boundary (a cache line, one 512-bit vector). Decision sets live in one:
/// read 8 f64 at a time from an arbitrary allocation, three loads in four
/// straddle two cache lines, which cost the scorer about 20%.
/// It dereferences to `[f64]`; serialized as a plain sequence.
#[derive(Clone, Debug, Default)]
pub struct AlignedVec {
    blocks: Vec<Line>,
    len: usize,
}

/// One cache line of f64.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Line([f64; 8]);

impl AlignedVec {
    /// `len` copies of `v`.
    pub fn filled(len: usize, v: f64) -> Self {
        Self {
            blocks: vec![Line([v; 8]); len.div_ceil(8)],
            len,
        }
    }
}

impl std::ops::Deref for AlignedVec {
    type Target = [f64];
    fn deref(&self) -> &[f64] {
        // SAFETY: `Line` is `repr(C)` over `[f64; 8]` with no padding (64
        // bytes, aligned to 64), so `blocks` is 8 * blocks.len() >= len
        // contiguous, initialized f64.
        unsafe { std::slice::from_raw_parts(self.blocks.as_ptr().cast::<f64>(), self.len) }
    }
}

impl std::ops::DerefMut for AlignedVec {
    fn deref_mut(&mut self) -> &mut [f64] {
        // SAFETY: as in `deref`, and `&mut self` makes the borrow unique.
        unsafe { std::slice::from_raw_parts_mut(self.blocks.as_mut_ptr().cast::<f64>(), self.len) }
    }
}

impl PartialEq for AlignedVec {
    fn eq(&self, other: &Self) -> bool {
        self[..] == other[..]
    }
}

impl serde::Serialize for AlignedVec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        <[f64] as serde::Serialize>::serialize(self, s)
    }
}

impl<'de> serde::Deserialize<'de> for AlignedVec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = <Vec<f64> as serde::Deserialize>::deserialize(d)?;
        let mut out = Self::filled(v.len(), 0.0);
        out.copy_from_slice(&v);
        Ok(out)
    }
}

/// In-place Cholesky `A = L L^T`; the lower triangle of `a` becomes `L`
/// (the strict upper triangle is left untouched). Returns log det A.
pub fn cholesky_in_place(a: &mut [f64], d: usize) -> Result<f64, LltError> {
    debug_assert_eq!(a.len(), d * d);
    let mut logdet = 0.0;
    for j in 0..d {
        let mut s = a[j * d + j];
        for k in 0..j {
            s -= a[j * d + k] * a[j * d + k];
        }
        if s.is_nan() || s <= 0.0 || s.is_infinite() {
            return Err(LltError { index: j, value: s });
        }
        let ljj = s.sqrt();
        a[j * d + j] = ljj;
        logdet += 2.0 * crate::math::ln(ljj);
        let inv = 1.0 / ljj;
        for i in j + 1..d {
            let mut s = a[i * d + j];
            for k in 0..j {
                s -= a[i * d + k] * a[j * d + k];
            }
            a[i * d + j] = s * inv;
        }
    }
    Ok(logdet)
}

/// Inverse of a symmetric positive-definite matrix by Cholesky.
///
/// `work` must hold `d * d` values. On success `inv` holds the full (both
/// triangles) inverse and the return value is log det `v`.
pub fn spd_inverse(v: &[f64], d: usize, inv: &mut [f64], work: &mut [f64]) -> Result<f64, LltError> {
    let l = &mut work[..d * d];
    l.copy_from_slice(v);
    let logdet = cholesky_in_place(l, d)?;
    // Invert L in place (lower triangular): Linv stored in the lower triangle of `l`.
    for j in 0..d {
        l[j * d + j] = 1.0 / l[j * d + j];
        for i in j + 1..d {
            let mut s = 0.0;
            for k in j..i {
                s -= l[i * d + k] * l[k * d + j];
            }
            l[i * d + j] = s / l[i * d + i];
        }
    }
    // inv = Linv^T Linv.
    for i in 0..d {
        for j in 0..=i {
            let mut s = 0.0;
            for k in i..d {
                s += l[k * d + i] * l[k * d + j];
            }
            inv[i * d + j] = s;
            inv[j * d + i] = s;
        }
    }
    Ok(logdet)
}

/// Like [`spd_inverse`], but on failure retries with `v + jitter I`, jitter
/// growing from 1e-10 x (mean |diagonal| + 1) by factors of 10, up to 30
/// times. Returns (log det of the matrix actually inverted, jitter used).
/// Only a matrix with NaN entries fails all retries.
pub fn spd_inverse_with_jitter(
    v: &[f64],
    d: usize,
    inv: &mut [f64],
    work: &mut [f64],
    shifted: &mut [f64],
) -> Result<(f64, f64), LltError> {
    with_jitter(v, d, inv, shifted, |m, out| spd_inverse(m, d, out, work))
}

/// The jitter retries of [`spd_inverse_with_jitter`] around any SPD
/// inversion `invert(matrix, inverse) -> log det` (e.g. faer's above the
/// crossover, `backend::dense`).
pub fn with_jitter(
    v: &[f64],
    d: usize,
    inv: &mut [f64],
    shifted: &mut [f64],
    mut invert: impl FnMut(&[f64], &mut [f64]) -> Result<f64, LltError>,
) -> Result<(f64, f64), LltError> {
    match invert(v, inv) {
        Ok(ld) => Ok((ld, 0.0)),
        Err(first) => {
            let scale = (0..d).map(|i| v[i * d + i].abs()).sum::<f64>() / d as f64 + 1.0;
            let mut jitter = 1e-10 * scale;
            for _ in 0..30 {
                shifted.copy_from_slice(v);
                for i in 0..d {
                    shifted[i * d + i] += jitter;
                }
                if let Ok(ld) = invert(shifted, inv) {
                    return Ok((ld, jitter));
                }
                jitter *= 10.0;
            }
            Err(first)
        }
    }
}

/// Calls `$f::<D>(args..., d)` with D = d for 2 <= d <= 16 (the per-step
/// loops then unroll: `sherman_morrison` at d = 10 went from 77 to about
/// 50 ns), D = 0 (d at run time) otherwise. The same operations in the
/// same order either way, so the same bits.
macro_rules! at_fixed_d {
    ($f:ident, $d:expr, $($arg:expr),*) => {
        match $d {
            2 => $f::<2>($($arg,)* 2),
            3 => $f::<3>($($arg,)* 3),
            4 => $f::<4>($($arg,)* 4),
            5 => $f::<5>($($arg,)* 5),
            6 => $f::<6>($($arg,)* 6),
            7 => $f::<7>($($arg,)* 7),
            8 => $f::<8>($($arg,)* 8),
            9 => $f::<9>($($arg,)* 9),
            10 => $f::<10>($($arg,)* 10),
            11 => $f::<11>($($arg,)* 11),
            12 => $f::<12>($($arg,)* 12),
            13 => $f::<13>($($arg,)* 13),
            14 => $f::<14>($($arg,)* 14),
            15 => $f::<15>($($arg,)* 15),
            16 => $f::<16>($($arg,)* 16),
            d => $f::<0>($($arg,)* d),
        }
    };
}

// The three per-step kernels below use plain multiply-then-add (never
// `mul_add`): results are then identical whether or not the dispatcher picked
// an FMA-capable path, and no path falls back to a software fma.
/// `y = A x` for a row-major `d x d` matrix.
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn matvec(a: &[f64], x: &[f64], y: &mut [f64], d: usize) {
    at_fixed_d!(matvec_at, d, a, x, y)
}

#[inline(always)]
fn matvec_at<const D: usize>(a: &[f64], x: &[f64], y: &mut [f64], d: usize) {
    let d = if D > 0 { D } else { d };
    for (i, yi) in y.iter_mut().enumerate().take(d) {
        let row = &a[i * d..(i + 1) * d];
        let mut s = 0.0;
        for (aij, xj) in row.iter().zip(x) {
            s += aij * xj;
        }
        *yi = s;
    }
}

/// Sherman-Morrison: `inv <- (A + x x^T)^{-1}` given `inv = A^{-1}` (symmetric).
/// `w` is workspace of length d. Returns q = x^T A^{-1} x; log det grows by
/// ln(1 + q) (matrix determinant lemma).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn sherman_morrison(inv: &mut [f64], x: &[f64], w: &mut [f64], d: usize) -> f64 {
    at_fixed_d!(sherman_morrison_at, d, inv, x, w)
}

#[inline(always)]
fn sherman_morrison_at<const D: usize>(inv: &mut [f64], x: &[f64], w: &mut [f64], d: usize) -> f64 {
    let d = if D > 0 { D } else { d };
    let (inv, x, w) = (&mut inv[..d * d], &x[..d], &mut w[..d]);
    for (i, wi) in w.iter_mut().enumerate().take(d) {
        let row = &inv[i * d..(i + 1) * d];
        let mut s = 0.0;
        for (aij, xj) in row.iter().zip(x) {
            s += aij * xj;
        }
        *wi = s;
    }
    let mut q = 0.0;
    for (wi, xi) in w.iter().zip(x).take(d) {
        q += wi * xi;
    }
    let c = -1.0 / (1.0 + q);
    for i in 0..d {
        let cwi = c * w[i];
        let row = &mut inv[i * d..(i + 1) * d];
        for (r, wj) in row.iter_mut().zip(w.iter()) {
            *r += cwi * wj;
        }
    }
    q
}

/// `row[j] += s * x[j]` for every j of the row: whole vectors of 8, then
/// the rest one entry at a time. Rows of a d x d matrix lie d entries
/// apart, so a masked 512-bit tail (what the compiler emits for the last d
/// mod 8 entries) spans the start of the next row, whose loads then stall
/// behind it; the update of a 10 x 10 Gram matrix took about 6% of a
/// `linear` agent-step that way, as much as skipping it.
/// (Sherman-Morrison's row updates, the same pattern, did not gain from
/// it: measured, left as they are.) The same operations either way (one
/// product, one sum per entry).
#[inline(always)]
fn add_scaled_row(row: &mut [f64], s: f64, x: &[f64]) {
    let full = row.len() / 8 * 8;
    let (head, tail) = row.split_at_mut(full);
    for (r, xj) in head.iter_mut().zip(x) {
        *r += s * xj;
    }
    for (r, xj) in tail.iter_mut().zip(&x[full..]) {
        // An opaque value: the compiler keeps this loop scalar.
        *r += s * std::hint::black_box(*xj);
    }
}

/// `a += x x^T` (full matrix).
#[multiversion::multiversion(targets(
    "x86_64+avx512f+avx512vl+avx512dq+avx512bw+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
pub fn add_outer(a: &mut [f64], x: &[f64], d: usize) {
    at_fixed_d!(add_outer_at, d, a, x)
}

#[inline(always)]
fn add_outer_at<const D: usize>(a: &mut [f64], x: &[f64], d: usize) {
    let d = if D > 0 { D } else { d };
    for i in 0..d {
        add_scaled_row(&mut a[i * d..(i + 1) * d], x[i], &x[..d]);
    }
}

/// Writes `c I` into `a`.
pub fn set_scaled_identity(a: &mut [f64], d: usize, c: f64) {
    a.fill(0.0);
    for i in 0..d {
        a[i * d + i] = c;
    }
}

/// A random symmetric positive definite d x d matrix: 0.5 I plus d + 3
/// outer products of standard normal vectors (for tests).
#[cfg(test)]
pub(crate) fn random_spd(d: usize, s: &mut crate::rng::Stream) -> Vec<f64> {
    let mut a = vec![0.0; d * d];
    set_scaled_identity(&mut a, d, 0.5);
    for _ in 0..d + 3 {
        let v: Vec<f64> = (0..d).map(|_| s.normal()).collect();
        add_outer(&mut a, &v, d);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    fn random_spd(d: usize, s: &mut Stream) -> Vec<f64> {
        let mut a = vec![0.0; d * d];
        for _ in 0..2 * d {
            let x: Vec<f64> = (0..d).map(|_| s.normal()).collect();
            add_outer(&mut a, &x, d);
        }
        for i in 0..d {
            a[i * d + i] += 0.5;
        }
        a
    }

    #[test]
    fn inverse_times_matrix_is_identity() {
        let mut s = Stream::new(&[1]);
        for d in [1, 2, 5, 10, 33] {
            let a = random_spd(d, &mut s);
            let mut inv = vec![0.0; d * d];
            let mut work = vec![0.0; d * d];
            spd_inverse(&a, d, &mut inv, &mut work).unwrap();
            for i in 0..d {
                for j in 0..d {
                    let v: f64 = (0..d).map(|k| a[i * d + k] * inv[k * d + j]).sum();
                    let want = if i == j { 1.0 } else { 0.0 };
                    assert!((v - want).abs() < 1e-9, "d={d} ({i},{j}) {v}");
                }
            }
        }
    }

    #[test]
    fn logdet_of_diagonal() {
        let d = 4;
        let mut a = vec![0.0; 16];
        for (i, v) in [1.0, 2.0, 3.0, 4.0].iter().enumerate() {
            a[i * d + i] = *v;
        }
        let ld = cholesky_in_place(&mut a, d).unwrap();
        assert!((ld - 24f64.ln()).abs() < 1e-14);
    }

    #[test]
    fn indefinite_is_an_error_and_jitter_recovers_semidefinite() {
        let d = 2;
        let a = [1.0, 2.0, 2.0, 1.0];
        let mut inv = [0.0; 4];
        let mut w = [0.0; 4];
        let e = spd_inverse(&a, d, &mut inv, &mut w).unwrap_err();
        assert_eq!(e.index, 1);
        // Singular PSD matrix: jitter makes it invertible.
        let b = [1.0, 1.0, 1.0, 1.0];
        let mut sh = [0.0; 4];
        let (_, jitter) = spd_inverse_with_jitter(&b, d, &mut inv, &mut w, &mut sh).unwrap();
        assert!(jitter > 0.0);
    }

    #[test]
    fn aligned_vec_is_aligned_and_round_trips() {
        for len in [0usize, 1, 7, 8, 9, 1040] {
            let mut v = AlignedVec::filled(len, 0.5);
            assert_eq!(v.len(), len);
            assert_eq!(v.as_ptr() as usize % 64, 0);
            for (i, x) in v.iter_mut().enumerate() {
                *x = i as f64;
            }
            let w = v.clone();
            assert_eq!(w.as_ptr() as usize % 64, 0);
            let back: AlignedVec = bincode::deserialize(&bincode::serialize(&w).expect("ser")).expect("de");
            assert_eq!(back.as_ptr() as usize % 64, 0);
            assert_eq!(&back[..], &v[..]);
        }
    }

    #[test]
    fn sherman_morrison_matches_direct() {
        let d = 6;
        let mut s = Stream::new(&[2]);
        let mut a = random_spd(d, &mut s);
        let mut inv = vec![0.0; d * d];
        let mut work = vec![0.0; d * d];
        let mut ld = spd_inverse(&a, d, &mut inv, &mut work).unwrap();
        let mut w = vec![0.0; d];
        for _ in 0..50 {
            let x: Vec<f64> = (0..d).map(|_| s.normal()).collect();
            let q = sherman_morrison(&mut inv, &x, &mut w, d);
            ld += (1.0 + q).ln();
            add_outer(&mut a, &x, d);
        }
        let mut direct = vec![0.0; d * d];
        let ld2 = spd_inverse(&a, d, &mut direct, &mut work).unwrap();
        assert!((ld - ld2).abs() < 1e-10);
        for (x, y) in inv.iter().zip(&direct) {
            assert!((x - y).abs() < 1e-10 * y.abs().max(1e-3));
        }
    }
}
