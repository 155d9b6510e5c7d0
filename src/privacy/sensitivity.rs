//! L2 sensitivities of the linear family's node statistics under each
//! neighbouring relation, derived in the doc comments and checked against a
//! worst-case search over pairs of observations in the tests.

crate::named_enum! {
    /// Which histories are neighbours.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
    pub enum Neighbours {
        /// One observation added or removed.
        AddRemove = "add_remove",
        /// One observation replaced by another.
        Substitute = "substitute",
    }
}

/// Squared L2 sensitivity of Private-FedLinUCB's node statistic (upper
/// triangle of x x^T, and x y) for ||x|| <= L, |y| <= 1. The node adds
/// (Z + Z^T)/2 (off-diagonal variance sigma^2 / 2, diagonal sigma^2) to the
/// Gram sum and N(0, sigma^2) to the bias sum, so over the released
/// parameters the privacy loss is that of a Gaussian mechanism of noise
/// sigma on a statistic whose squared distance is ||G - G'||_F^2 +
/// ||b - b'||^2:
/// - add/remove: ||x||^4 + ||x||^2 y^2 <= L^4 + L^2;
/// - substitute, (x, y) by (x', y'): with ||x|| = a, ||x'|| = b and cosine
///   c, ||x x^T - x' x'^T||_F^2 = a^4 + b^4 - 2 a^2 b^2 c^2 and ||x y - x'
///   y'||^2 <= a^2 + b^2 + 2 a b |c| (y = -y' = +-1, the vertices of the
///   convex square of rewards). At a = b = L the sum 2 L^4 (1 - c^2) + 2 L^2
///   (1 + c) peaks at c = 1 / (2 L^2) (a 60 degree pair at L = 1) with
///   2 L^4 + 2 L^2 + 1/2 where 2 L^2 >= 1, else at c = 1 with 4 L^2;
///   shorter vectors give less (`tight_sensitivities_match_a_worst_case_search`
///   searches a, b, c and y, y').
pub fn zhou_sensitivity_sq(l: f64, n: Neighbours) -> f64 {
    let (l2, l4) = (l * l, l * l * l * l);
    match n {
        Neighbours::AddRemove => l4 + l2,
        Neighbours::Substitute if 2.0 * l2 >= 1.0 => 2.0 * l4 + 2.0 * l2 + 0.5,
        Neighbours::Substitute => 4.0 * l2,
    }
}

/// L2 sensitivity of FedUCB's node statistic: the Gram and bias blocks of
/// [x; y][x; y]^T, symmetric (d+1) x (d+1) with the y^2 corner not released
/// (the leaf holds U and u only, `cpu::peer`'s and the tree's layout), under
/// the node noise (N_hat + N_hat^T)/sqrt(2) (off-diagonal variance
/// sigma_N^2, diagonal 2 sigma_N^2): over the upper triangle the privacy
/// loss is that of noise sqrt(2) sigma_N on a statistic of squared
/// distance ||Delta||_F^2 (the full symmetric difference, the bias counted
/// twice):
/// - add/remove: ||x||^4 + 2 ||x||^2 y^2 <= L^4 + 2 L^2 (sqrt 3 at L = 1;
///   counting the y^2 corner gave L^2 + 1);
/// - substitute: a^4 + b^4 - 2 a^2 b^2 c^2 + 2 (a^2 + b^2 + 2 a b |c|) (as in
///   [`zhou_sensitivity_sq`]); at a = b = L it peaks at c = 1 / L^2 with 2
///   (L^2 + 1)^2 where L >= 1 (x' = x, y' = -y at L = 1: 8), else at c = 1
///   with 8 L^2.
pub fn dubey_sensitivity(l: f64, n: Neighbours) -> f64 {
    let l2 = l * l;
    match n {
        Neighbours::AddRemove => (l2 * l2 + 2.0 * l2).sqrt(),
        Neighbours::Substitute if l2 >= 1.0 => std::f64::consts::SQRT_2 * (l2 + 1.0),
        Neighbours::Substitute => (8.0 * l2).sqrt(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tight sensitivities at L = 1: Private-FedLinUCB 2 (add/remove)
    /// and 4.5 (substitute, a 60 degree pair) squared; FedUCB sqrt 3 and
    /// sqrt 8; and at L = 2 and L = 0.5 the closed forms.
    #[test]
    fn substitution_sensitivities() {
        assert_eq!(zhou_sensitivity_sq(1.0, Neighbours::AddRemove), 2.0);
        assert_eq!(zhou_sensitivity_sq(1.0, Neighbours::Substitute), 4.5);
        // L = 2: L^4 + L^2 = 20; 2 L^4 + 2 L^2 + 1/2 = 40.5.
        assert_eq!(zhou_sensitivity_sq(2.0, Neighbours::AddRemove), 20.0);
        assert_eq!(zhou_sensitivity_sq(2.0, Neighbours::Substitute), 40.5);
        assert_eq!(zhou_sensitivity_sq(0.5, Neighbours::Substitute), 1.0);
        assert!((dubey_sensitivity(1.0, Neighbours::AddRemove) - 3f64.sqrt()).abs() < 1e-15);
        assert!((dubey_sensitivity(1.0, Neighbours::Substitute) - 8f64.sqrt()).abs() < 1e-15);
        assert!((dubey_sensitivity(2.0, Neighbours::Substitute) - 50f64.sqrt()).abs() < 1e-14);
        assert!((dubey_sensitivity(0.5, Neighbours::Substitute) - 2f64.sqrt()).abs() < 1e-15);
    }

    /// Each sensitivity against a search over pairs of observations: norms
    /// a, b in [0, L] and the cosine c between x and x' on grids, rewards
    /// at the vertices of [-1, 1]^2 (the squared distance is convex in (y,
    /// y')). The formula is never exceeded and is reached within 1e-3
    /// (relative): a wrong (too small or too loose) formula fails.
    #[test]
    fn tight_sensitivities_match_a_worst_case_search() {
        for l in [0.3, 0.6, 1.0, 1.5, 3.0] {
            let (mut zhou_add, mut zhou_sub, mut dubey_add, mut dubey_sub) = (0.0f64, 0.0f64, 0.0f64, 0.0f64);
            for ia in 0..=60 {
                let a = l * f64::from(ia) / 60.0;
                for y in [-1.0f64, 1.0] {
                    zhou_add = zhou_add.max(a.powi(4) + a * a * y * y);
                    dubey_add = dubey_add.max(a.powi(4) + 2.0 * a * a * y * y);
                }
                for ib in 0..=60 {
                    let b = l * f64::from(ib) / 60.0;
                    for ic in 0..=400 {
                        let c = -1.0 + f64::from(ic) / 200.0;
                        let gram = a.powi(4) + b.powi(4) - 2.0 * a * a * b * b * c * c;
                        for (y, y2) in [(1.0f64, 1.0f64), (1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0)] {
                            // ||x y - x' y'||^2 with <x, x'> = a b c.
                            let bias = a * a * y * y + b * b * y2 * y2 - 2.0 * y * y2 * a * b * c;
                            zhou_sub = zhou_sub.max(gram + bias);
                            dubey_sub = dubey_sub.max(gram + 2.0 * bias);
                        }
                    }
                }
            }
            for (what, found, formula) in [
                ("zhou add", zhou_add, zhou_sensitivity_sq(l, Neighbours::AddRemove)),
                ("zhou sub", zhou_sub, zhou_sensitivity_sq(l, Neighbours::Substitute)),
                (
                    "dubey add",
                    dubey_add,
                    dubey_sensitivity(l, Neighbours::AddRemove).powi(2),
                ),
                (
                    "dubey sub",
                    dubey_sub,
                    dubey_sensitivity(l, Neighbours::Substitute).powi(2),
                ),
            ] {
                assert!(
                    found <= formula * (1.0 + 1e-12),
                    "{what} at L = {l}: search {found} > {formula}"
                );
                assert!(
                    found >= formula * (1.0 - 1e-3),
                    "{what} at L = {l}: search {found} << {formula}"
                );
            }
        }
    }
}
