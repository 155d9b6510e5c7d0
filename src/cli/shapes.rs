//! `fedbandits calibrate --shapes`: times every family's shapes (jobs that
//! together vary each term of its time model,
//! [`crate::algo::family_entry::Family::shapes`]) on one thread of this
//! machine, fits the terms' seconds to them
//! ([`crate::sim::cost::fit_family`]) and records the timings with this
//! machine's calibration, where `plan` finds them. The printed table
//! gives each shape's measured rate and measured/modelled before (built-in
//! prices) and after the fit; the model's error is the range of the last.

use super::CliError;
use super::bench::{On, measure};
use crate::algo::family::FAMILIES;
use crate::backend::calibration::ShapeRow;
use crate::job::Job;
use std::path::Path;

/// The longest horizon a shape is timed at.
const MOST_ROUNDS: u64 = 1 << 26;

/// Times every shape (of workloads whose name contains `only`, if given)
/// until a run takes `seconds`; the rows and the progress text.
pub fn time_shapes(seconds: f64, only: Option<&str>) -> Result<(Vec<ShapeRow>, String), CliError> {
    let pool = crate::sim::runner::thread_pool(1)?;
    let mut rows = Vec::new();
    let mut text = String::new();
    for f in FAMILIES {
        for &(name, yaml, first) in f.shapes {
            if only.is_some_and(|o| !name.contains(o)) {
                continue;
            }
            let mut rounds = first.max(1);
            let m = loop {
                let m = measure(name, yaml, 1, rounds, On::Cpu(&pool));
                match m {
                    Ok(m) if m.seconds >= seconds || rounds >= MOST_ROUNDS => break Ok(m),
                    Ok(m) => {
                        // Aim at 1.2x the budget from this run's pace, at
                        // least doubling.
                        let want = (rounds as f64 * 1.2 * seconds / m.seconds.max(1e-6)).ceil() as u64;
                        rounds = want.clamp(rounds * 2, MOST_ROUNDS);
                    }
                    Err(e) => break Err(e),
                }
            };
            match m {
                Ok(m) => {
                    let units = units_of(yaml, m.rounds)?;
                    eprintln!("calibrate --shapes {name}: {:.3e} agent-steps/s", m.rate);
                    rows.push(ShapeRow {
                        family: f.name.into(),
                        shape: name.into(),
                        horizon: m.rounds,
                        units,
                        seconds_per_step: 1.0 / m.rate,
                    });
                }
                Err(e) => text += &format!("shape {name}: not measured: {e}\n"),
            }
        }
    }
    Ok((rows, text))
}

/// A shape's units of its family's terms at `rounds`, named.
fn units_of(yaml: &str, rounds: u64) -> Result<Vec<(String, f64)>, CliError> {
    let job = Job::parse(Path::new("shape"), &yaml.replace("{T}", &rounds.to_string()))?;
    let cost = job.cells[0].config.cost();
    let family = FAMILIES.iter().find(|f| f.name == cost.family);
    Ok(family
        .map(|f| f.cost_terms)
        .unwrap_or_default()
        .iter()
        .zip(cost.units)
        .map(|(t, u)| (t.name.to_string(), u))
        .collect())
}

/// The shapes' table: each shape's rate and measured/modelled before and
/// after the fit, then each family's fitted prices against the built-in.
pub fn shapes_table(rows: &[ShapeRow]) -> String {
    use crate::sim::cost::{fit_family, fits_terms};
    let mut out = format!(
        "{:<34} {:>9} {:>14} {:>15} {:>14}\n",
        "shape (one thread)", "horizon", "agent-steps/s", "built-in model", "fitted model"
    );
    let mut prices = String::new();
    for f in FAMILIES {
        let mine: Vec<&ShapeRow> = rows.iter().filter(|r| r.family == f.name && fits_terms(r, f)).collect();
        let Some(fit) = fit_family(f, &mine) else { continue };
        for r in &mine {
            let modelled = |p: &[f64]| r.units.iter().zip(p).map(|(u, p)| u.1 * p).sum::<f64>();
            let built_in: Vec<f64> = f.cost_terms.iter().map(|t| t.seconds).collect();
            out += &format!(
                "{:<34} {:>9} {:>14.3e} {:>14.2}x {:>13.2}x\n",
                r.shape,
                r.horizon,
                1.0 / r.seconds_per_step,
                r.seconds_per_step / modelled(&built_in),
                r.seconds_per_step / modelled(&fit.prices)
            );
        }
        for (t, p) in f.cost_terms.iter().zip(&fit.prices) {
            prices += &format!(
                "  {} {}: {:.3e} s per {} (built in {:.3e})\n",
                f.name, t.name, p, t.unit, t.seconds
            );
        }
        prices += &format!(
            "  {}: measured was {:.2}x to {:.2}x of the fitted model on its {} shapes\n",
            f.name,
            fit.low,
            fit.high,
            mine.len()
        );
    }
    out + "(measured / modelled time; `plan` uses the fitted model)\nfitted prices:\n" + &prices
}
