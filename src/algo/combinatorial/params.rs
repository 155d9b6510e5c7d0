//! The combinatorial family's parameters (Solanki et al.): a cell's raw
//! parameters resolved into its [`CombConfig`].

use super::p_fcb::{PFcbConfig, Window};
use super::table::{
    BUDGET, INSTANCE_KIND, INSTANCES, MAX_CAPACITY, OMEGA1, OMEGA2, ORACLE, PRODUCERS, QUALITY_THRESHOLD, RHO, T_HIGH,
    T_LOW, TAU_START, WINDOW, ZETA,
};
use super::{CombAlgorithm, CombConfig};
use crate::algo::options::Calibration;
use crate::algo::params::{CALIBRATION, DELTA, EPSILON, M, NOISE, SAMPLER};
use crate::algo::resolve::Params;
use crate::env::procurement::{EXACT_LIMIT, Oracle, ProcurementSpec};

/// Resolves a combinatorial-family cell: agents `m` (default 10),
/// `producers` (30), `instance_kind`, `quality_threshold` (alpha, 0.4),
/// `rho`, `max_capacity`, `instances` (5), `zeta`, `oracle`; for `p_fcb`
/// `epsilon` (required; `.inf`: no noise) and `delta` (required where
/// epsilon is finite), `t_low`, `t_high`, `omega1`, `omega2`, `tau_start`,
/// `calibration`, `budget`, `window`.
pub fn resolve(p: &mut Params<'_>) -> Box<dyn crate::algo::FamilyConfig> {
    let (_, _, horizon) = p.cell();
    let algorithm: CombAlgorithm = p.algorithm();
    let env = ProcurementSpec {
        kind: p.take(INSTANCE_KIND),
        agents: p.take(M) as usize,
        producers: p.take(PRODUCERS) as usize,
        alpha: p.take(QUALITY_THRESHOLD),
        rho: p.take(RHO),
        max_capacity: p.take(MAX_CAPACITY) as u32,
    };
    let instances = p.take(INSTANCES) as u32;
    let zeta = p.take(ZETA);
    let oracle = oracle(p, &env);
    let private = match algorithm {
        CombAlgorithm::PFcb => p_fcb(p, env.max_capacity, horizon),
        CombAlgorithm::NonFederated | CombAlgorithm::Fcb => PFcbConfig::default(),
    };
    Box::new(CombConfig {
        algorithm,
        env,
        horizon,
        instances,
        zeta,
        private,
        oracle,
    })
}

/// The oracle: greedy, or exact where its search is bounded
/// ((max_capacity + 1)^producers choices per agent and round at most
/// [`EXACT_LIMIT`]; capacities are U{1..max_capacity}).
fn oracle(p: &mut Params<'_>, env: &ProcurementSpec) -> Oracle {
    let oracle = p.take(ORACLE);
    if oracle == Oracle::Exact {
        let worst = u64::from(env.max_capacity)
            .checked_add(1)
            .and_then(|k| u32::try_from(env.producers).ok().and_then(|m| k.checked_pow(m)));
        if worst.is_none_or(|w| w > EXACT_LIMIT) {
            p.err(
                ORACLE,
                format!(
                    "exact searches up to (max_capacity + 1)^producers = {}^{} choices per agent and round, more than \
                     {EXACT_LIMIT}: lower max_capacity or producers, or use oracle: greedy",
                    u64::from(env.max_capacity) + 1,
                    env.producers
                ),
            );
        }
    }
    oracle
}

/// P-FCB's privacy and schedule: epsilon (required: a number > 0, or
/// `.inf` for P-FCB without noise, the same schedule and acceptance window
/// with exact messages, the counterpart its cost of privacy is measured
/// against), delta (required where epsilon is finite), t_low <= t_high,
/// omega1, omega2, tau_start, calibration, budget, window, sampler (its
/// lattice bounded by the environment's `max_capacity`).
fn p_fcb(p: &mut Params<'_>, max_capacity: u32, horizon: u64) -> PFcbConfig {
    let mut private = PFcbConfig {
        max_capacity,
        ..PFcbConfig::default()
    };
    match (p.given(EPSILON), p.given(DELTA)) {
        (Some(e), _) if e.is_infinite() => {
            // No noise: nothing to calibrate or account (calibration,
            // budget and delta do not apply and are left null).
            private.epsilon = e;
            p.record(EPSILON, &e);
        }
        (Some(e), _) if crate::privacy::gdp::epsilon_beyond(e).is_some() => {
            p.err(EPSILON, crate::privacy::gdp::epsilon_beyond(e).unwrap_or_default());
        }
        (Some(e), Some(d)) => {
            private.epsilon = e;
            private.delta = d;
            p.record(EPSILON, &e);
            p.record(DELTA, &d);
        }
        (e, d) => {
            if e.is_none() {
                p.err(
                    EPSILON,
                    "missing; p_fcb needs epsilon (number > 0, or .inf for no noise)",
                );
            }
            if d.is_none() {
                p.err(
                    DELTA,
                    "missing; p_fcb needs delta (number in (0, 1)) where epsilon is finite",
                );
            }
        }
    }
    private.t_low = p.take(T_LOW) as u64;
    private.t_high = p.take(T_HIGH) as u64;
    if private.t_low > private.t_high {
        p.err(
            T_HIGH,
            format!("t_high = {} is below t_low = {}", private.t_high, private.t_low),
        );
    }
    private.omega1 = p.take(OMEGA1);
    private.omega2 = p.take(OMEGA2);
    private.tau_start = p.take(TAU_START);
    private.prose_window = match p.take(WINDOW) {
        Window::Prose => true,
        Window::Procedure => false,
    };
    if !private.is_private() {
        return private;
    }
    private.noise = p.take(NOISE);
    p.substitute_only("p_fcb (its figures change one round's procurement)");
    private.exact = p.take_in(CALIBRATION, &[Calibration::Exact, Calibration::Paper], "p_fcb") == Calibration::Exact;
    if private.exact && p.is_set(BUDGET) {
        p.err(
            BUDGET,
            "budget splits epsilon over rounds as the paper does and applies to calibration: paper only \
             (calibration: exact, the default, gives every message the same noise, solved from the target)",
        );
    }
    private.budget = if private.exact { p.read(BUDGET) } else { p.take(BUDGET) };
    private.sampler = p.take(SAMPLER);
    if let Err(why) = super::p_fcb::message_lattice(&private, horizon) {
        p.err(SAMPLER, why);
    }
    private
}
