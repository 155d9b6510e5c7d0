//! `linear_gap`: Dubey & Pentland's synthetic environment (NeurIPS 2020, 4.4).
//!
//! theta* is uniform on the unit sphere. Each round each agent gets K actions:
//! K - 1 with <x, theta*> ~ U[0.5, 0.6] and one optimal with <x*, theta*> ~
//! U[0.7, 0.8] at a uniformly random index, each built as
//! x = v theta* + sqrt(1 - v^2) r u with u a random unit vector orthogonal to
//! theta* and r ~ U[0, 1], so ||x|| <= 1 and <x, theta*> = v exactly. Rewards
//! are Bernoulli(v). For d = 1 there is no orthogonal direction and x = v theta*.
//!
//! Draws per round: K d normals (lanes), 1 + 2K uniforms (scalar).

use super::{AgentStreams, DecisionSet, random_unit};
use crate::rng::Stream;
use crate::rng::normal::fill_normals;

pub(crate) fn draw_theta(d: usize, s: &mut Stream) -> Vec<f64> {
    random_unit(d, s)
}

pub(crate) fn draw(theta: &[f64], s: &mut AgentStreams, ds: &mut DecisionSet) {
    let (d, k, kp) = (ds.d, ds.k, ds.kp);
    ds.prepared_for = 0; // every action is rewritten each round
    fill_normals(&mut s.lanes, &mut ds.scratch[..k * d]);
    let opt = s.uniforms.below(k as u64) as usize;
    let mut best = f64::NEG_INFINITY;
    for a in 0..k {
        let base = if a == opt { 0.7 } else { 0.5 };
        let v = base + 0.1 * s.uniforms.uniform();
        let r = s.uniforms.uniform();
        let g = &mut ds.scratch[a * d..(a + 1) * d];
        let proj: f64 = g.iter().zip(theta).map(|(x, t)| x * t).sum();
        for (gi, ti) in g.iter_mut().zip(theta) {
            *gi -= proj * ti;
        }
        let norm = g.iter().map(|x| x * x).sum::<f64>().sqrt();
        let c = if norm > 1e-12 {
            (1.0 - v * v).sqrt() * r / norm
        } else {
            0.0
        };
        for j in 0..d {
            ds.x[j * kp + a] = v * theta[j] + c * g[j];
        }
        ds.mean[a] = v;
        best = best.max(v);
    }
    ds.best = best;
}
