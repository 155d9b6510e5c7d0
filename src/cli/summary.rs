//! The summary `fedbandits run` prints when it is done: what ran, then per
//! cell the final per-agent regret (mean, sd, median, largest over
//! repetitions), sync rounds and the accountant's epsilon, each cell
//! flagged when some repetition's regret grows linearly over the last
//! decade of the horizon (`regret_exponent` >= 0.9) or its curve grows
//! linearly over a long stretch (`[linear t = a-b]`), and a footnote for
//! every private cell whose figure is null, with the reason.

use super::emit;
use crate::algo::curve::LINEAR_GROWTH_EXPONENT;
use crate::sim::runner::{CellSummary, RunReport};

/// Prints the warnings, what ran (stderr) and the table (stdout).
pub fn print_report(r: &RunReport) {
    for w in &r.warnings {
        eprintln!("warning: {w}");
    }
    if r.claimed.superseded > 0 {
        eprintln!(
            "fedbandits: this job extends the one {} was computed for: its {} part file(s) are superseded (their \
             rows are kept as units and go into this job's parts); they and their manifest moved to {}, where the \
             previous study stays loadable until this job's `fedbandits merge` completes",
            r.dir.display(),
            r.claimed.superseded,
            r.dir
                .join(".superseded")
                .join(r.dir.file_name().unwrap_or_default())
                .display()
        );
    }
    if r.claimed.restored > 0 {
        eprintln!(
            "fedbandits: {} repetition(s) written back to .units from the part files (the units had been compacted)",
            r.claimed.restored
        );
    }
    if r.claimed.kept_part {
        eprintln!(
            "fedbandits: {} holds every repetition of this run ({}; its units were compacted by merge --compact): \
             nothing to compute, the part is kept as it is",
            r.part.display(),
            r.units_skipped
        );
    } else if r.units_skipped > 0 {
        eprintln!(
            "fedbandits: reused {} finished repetition(s) in {} (not recomputed; delete their .units files to \
             recompute)",
            r.units_skipped,
            r.dir.display()
        );
    }
    let (resumed, before, first, last) = r.resumed;
    if resumed > 0 {
        let at = if first == last {
            format!("t = {first}")
        } else {
            format!("t = {first} to {last}")
        };
        eprintln!(
            "fedbandits: resumed {resumed} repetition(s) from their snapshots (at {at}); the {:.3e} agent-steps \
             computed before the stop are not counted below",
            before as f64
        );
    }
    let rate = if r.seconds > 0.0 {
        r.agent_steps as f64 / r.seconds
    } else {
        0.0
    };
    // The peak against the estimate: what a Slurm booking can be judged by.
    let peak = crate::sim::memory::peak_resident()
        .map(|b| format!("; peak resident memory {}", crate::sim::memory::human(b)))
        .unwrap_or_default();
    eprintln!(
        "fedbandits: ran {} repetition(s), {:.3e} agent-steps in {:.1} s ({:.3e} agent-steps/s in this run); {} \
         {}{peak}",
        r.units_run,
        r.agent_steps as f64,
        r.seconds,
        rate,
        if r.claimed.kept_part { "kept" } else { "wrote" },
        r.part.display()
    );
    if r.shard.count > 1 {
        emit(&format!(
            "shard {}/{}: the figures below are this shard's repetitions only; the study's come from `fedbandits \
             merge` and the report\n",
            r.shard.index, r.shard.count
        ));
    }
    emit(&table(&r.summaries));
}

/// The per-cell table and its legend.
pub fn table(summaries: &[CellSummary]) -> String {
    let mut out = format!(
        "{:>4}  {:>12} {:>9} {:>10} {:>10} {:>8} {:>8}  cell\n",
        "#", "agent regret", "sd", "median", "max", "syncs", "acct eps"
    );
    for s in summaries {
        let mut note = if s.skipped {
            " (reused: computed by an earlier run)"
        } else {
            ""
        }
        .to_string();
        if let Some(cost) = s.exploration_cost {
            note += &format!(" [after exploration; +{cost:.2} exploring]");
        }
        if let Some(frr) = s.frr {
            note += &format!(" [FRR {frr:.3}]");
        }
        if s.linear_growth > 0 {
            note += &format!(
                " [{} of {} repetitions grow linearly over the last decade]",
                s.linear_growth, s.repetitions
            );
        }
        if let Some(((from, to), true)) = s.linear_stretch {
            note += &format!(" [linear t = {from}-{to}]");
        }
        let eps = match (s.epsilon, &s.epsilon_null) {
            // A figure near 0 is not perfect privacy: its delta beside it.
            (Some(e), _) if e < 0.01 => crate::privacy::accountant::fmt_figure(Some(e), s.delta.unwrap_or(0.0)),
            (Some(e), _) => format!("{e:.3}"),
            (None, Some(_)) => "null*".to_string(),
            (None, None) => "-".to_string(),
        };
        // Sync rounds are a mean over repetitions: whole unless they differ.
        let syncs = if s.sync_rounds_mean.fract() == 0.0 {
            format!("{}", s.sync_rounds_mean)
        } else {
            format!("{:.1}", s.sync_rounds_mean)
        };
        // One repetition has no spread: its sd is not 0 but unknown.
        let sd = if s.repetitions > 1 {
            format!("{:.2}", s.agent_regret_sd)
        } else {
            "-".to_string()
        };
        out += &format!(
            "{:>4}  {:>12.2} {sd:>9} {:>10.2} {:>10.2} {syncs:>8} {eps:>8}  {}{note}\n",
            s.index, s.agent_regret_mean, s.agent_regret_median, s.agent_regret_max, s.label
        );
    }
    out += "agent regret: final regret per agent, mean over repetitions (sd, median, max: over repetitions; \
            sd - where a cell has one repetition here)\n";
    if summaries.iter().any(|s| s.exploration_cost.is_some()) {
        out += "after exploration: the cell's regret counts the rounds after its exploration phase (exploration_rounds), \
                which costs every algorithm of its family alike (+ its per-agent cost); FRR and the linear stretch \
                read it too\n";
    }
    if summaries.iter().any(|s| s.frr.is_some()) {
        out += "FRR: federated regret ratio (Solanki et al.), the cell's mean final regret per agent over that of \
                its family's baseline (agents that do not federate) at the same swept values; below 1: federating \
                pays\n";
    }
    if summaries.iter().any(|s| s.linear_growth > 0) {
        out += &format!(
            "grow linearly: regret_exponent >= {LINEAR_GROWTH_EXPONENT} (the slope of log regret against log t \
             between T/10 and T; 1 is a policy that has stopped learning, a learner's is below 1)\n"
        );
    }
    if summaries.iter().any(|s| matches!(s.linear_stretch, Some((_, true)))) {
        out += &format!(
            "linear t = a-b: the longest stretch over which the curve (geometric mean over repetitions) grows \
             linearly, its local slope of log regret against log t >= {LINEAR_GROWTH_EXPONENT} over each quarter \
             decade; shown where it spans 2+ decades and ends at or beyond sqrt(T): the cell learned late\n"
        );
    }
    if summaries
        .iter()
        .any(|s| s.epsilon.is_some() || s.epsilon_null.is_some())
    {
        out += "acct eps: the accountant's epsilon of the whole run (acct_epsilon: exact for the Gaussian\n  \
                mechanisms at the cell's delta, pure epsilon where the mechanism has no delta); -: not private; \
                null*: private, no figure (below)\n";
    }
    out + &null_notes(summaries)
}

/// One footnote per distinct reason a private cell's figure is null, with
/// the cells it concerns (printed on stdout with the table, so `--quiet`
/// keeps it).
fn null_notes(summaries: &[CellSummary]) -> String {
    let mut notes: Vec<(&str, Vec<usize>)> = Vec::new();
    for s in summaries {
        let Some(why) = s.epsilon_null.as_deref() else { continue };
        match notes.iter_mut().find(|(w, _)| *w == why) {
            Some((_, cells)) => cells.push(s.index),
            None => notes.push((why, vec![s.index])),
        }
    }
    notes
        .into_iter()
        .map(|(why, cells)| {
            let list: Vec<String> = cells.iter().map(|c| format!("[{c}]")).collect();
            format!("* null acct_epsilon, cells {}: {why}\n", list.join(" "))
        })
        .collect()
}
