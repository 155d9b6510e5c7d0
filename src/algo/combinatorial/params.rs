//! The combinatorial family's parameters (Solanki et al.): a cell's raw
//! parameters resolved into its [`CombConfig`].

use super::p_fcb::{Budget, PFcbConfig, TauStart};
use super::{CombAlgorithm, CombConfig};
use crate::algo::params::Value;
use crate::algo::resolve::Params;
use crate::env::procurement::{EXACT_LIMIT, InstanceKind, Oracle, ProcurementSpec};

/// Resolves a combinatorial-family cell: agents `m` (default 10),
/// `producers` (30), `instance_kind`, `quality_threshold` (alpha, 0.4),
/// `rho`, `max_capacity`, `instances` (5), `zeta`, `oracle`; for `p_fcb`
/// `epsilon` (required; `.inf`: no noise) and `delta` (required where
/// epsilon is finite), `t_low`, `t_high`, `omega1`, `omega2`, `tau_start`,
/// `calibration`, `budget`, `window`.
pub fn resolve(p: &mut Params<'_>) -> Box<dyn crate::algo::FamilyConfig> {
    let (algo, _, horizon) = p.cell();
    let algorithm: CombAlgorithm = p.algorithm(algo);
    let kind = p.s("instance_kind");
    let env = ProcurementSpec {
        kind: if kind == "normal" {
            InstanceKind::Normal
        } else {
            InstanceKind::Uniform
        },
        agents: p.i("m") as usize,
        producers: p.i("producers") as usize,
        alpha: p.f("quality_threshold"),
        rho: p.f("rho"),
        max_capacity: p.i("max_capacity") as u32,
    };
    p.set("m", Value::Int(env.agents as i64));
    p.set("producers", Value::Int(env.producers as i64));
    p.set("instance_kind", Value::Str(kind));
    p.set("quality_threshold", Value::Float(env.alpha));
    p.set("rho", Value::Float(env.rho));
    p.set("max_capacity", Value::Int(i64::from(env.max_capacity)));
    let instances = p.i("instances") as u32;
    p.set("instances", Value::Int(i64::from(instances)));
    let zeta = p.f("zeta");
    p.set("zeta", Value::Float(zeta));
    let oracle = oracle(p, &env);
    let private = if algorithm == CombAlgorithm::PFcb {
        p_fcb(p)
    } else {
        PFcbConfig::default()
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
    let name = p.s("oracle");
    let oracle = if name == "exact" {
        let worst = u64::from(env.max_capacity)
            .checked_add(1)
            .and_then(|k| u32::try_from(env.producers).ok().and_then(|m| k.checked_pow(m)));
        if worst.is_none_or(|w| w > EXACT_LIMIT) {
            p.err(
                "oracle",
                format!(
                    "exact searches up to (max_capacity + 1)^producers = {}^{} choices per agent and round, more than \
                     {EXACT_LIMIT}: lower max_capacity or producers, or use oracle: greedy",
                    u64::from(env.max_capacity) + 1,
                    env.producers
                ),
            );
        }
        Oracle::Exact
    } else {
        Oracle::Greedy
    };
    p.set("oracle", Value::Str(name));
    oracle
}

/// P-FCB's privacy and schedule: epsilon (required: a number > 0, or
/// `.inf` for P-FCB without noise, the same schedule and acceptance window
/// with exact messages, the counterpart its cost of privacy is measured
/// against), delta (required where epsilon is finite), t_low <= t_high,
/// omega1, omega2, tau_start, calibration, budget, window.
fn p_fcb(p: &mut Params<'_>) -> PFcbConfig {
    let mut private = PFcbConfig::default();
    match (
        p.get("epsilon").and_then(Value::as_f64),
        p.get("delta").and_then(Value::as_f64),
    ) {
        (Some(e), _) if e.is_infinite() => {
            // No noise: nothing to calibrate or account (calibration,
            // budget and delta do not apply and are left null).
            private.epsilon = e;
            p.set("epsilon", Value::Float(e));
        }
        (Some(e), _) if crate::privacy::gdp::epsilon_beyond(e).is_some() => {
            p.err("epsilon", crate::privacy::gdp::epsilon_beyond(e).unwrap_or_default());
        }
        (Some(e), Some(d)) => {
            private.epsilon = e;
            private.delta = d;
            p.set("epsilon", Value::Float(e));
            p.set("delta", Value::Float(d));
        }
        (e, d) => {
            if e.is_none() {
                p.err(
                    "epsilon",
                    "missing; p_fcb needs epsilon (number > 0, or .inf for no noise)",
                );
            }
            if d.is_none() {
                p.err(
                    "delta",
                    "missing; p_fcb needs delta (number in (0, 1)) where epsilon is finite",
                );
            }
        }
    }
    private.t_low = p.i("t_low") as u64;
    private.t_high = p.i("t_high") as u64;
    if private.t_low > private.t_high {
        p.err(
            "t_high",
            format!("t_high = {} is below t_low = {}", private.t_high, private.t_low),
        );
    }
    private.omega1 = p.f("omega1");
    private.omega2 = p.f("omega2");
    let tau = p.s("tau_start");
    private.tau_start = if tau == "t_low" { TauStart::TLow } else { TauStart::One };
    let window = p.s("window");
    private.prose_window = window == "prose";
    p.set("t_low", Value::Int(private.t_low as i64));
    p.set("t_high", Value::Int(private.t_high as i64));
    p.set("omega1", Value::Float(private.omega1));
    p.set("omega2", Value::Float(private.omega2));
    p.set("tau_start", Value::Str(tau));
    p.set("window", Value::Str(window));
    if !private.is_private() {
        return private;
    }
    private.noise = p.b("noise");
    p.set("noise", Value::Bool(private.noise));
    p.substitute_only("p_fcb (its figures change one round's procurement)");
    let cal = p.choice("calibration", &["exact", "paper"], "p_fcb");
    private.exact = cal == "exact";
    p.set("calibration", Value::Str(cal));
    let budget = p.s("budget");
    if private.exact && p.get("budget").is_some() {
        p.err(
            "budget",
            "budget splits epsilon over rounds as the paper does and applies to calibration: paper only \
             (calibration: exact, the default, gives every message the same noise, solved from the target)",
        );
    }
    private.budget = if budget == "normalized" {
        Budget::Normalized
    } else {
        Budget::Paper
    };
    if !private.exact {
        p.set("budget", Value::Str(budget));
    }
    private
}
