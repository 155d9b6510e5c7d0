//! The text renderers of `list`, `validate` and `plan`: the expanded grid,
//! totals, memory and time estimates, and each private cell's figures.

use crate::algo::family::FAMILIES;
use crate::algo::family::params;
use crate::job::Job;
use crate::sim::memory::human;

/// The text of `fedbandits list`: every family's algorithms, environments,
/// parameters and columns, then every parameter.
pub(super) fn list_text() -> String {
    let mut out = String::new();
    for f in FAMILIES {
        out += &format!("family {}: {}\n  algorithms:\n", f.name, f.doc);
        for (n, d) in f.algorithms {
            out += &format!("    {n:<20} {d}\n");
        }
        out += "  environments:\n";
        for (n, d) in f.environments {
            out += &format!("    {n:<20} {d}\n");
        }
        out += &format!("  parameters (output columns): {}\n", f.parameters().join(", "));
        out += &format!(
            "  its output columns (not every family's; in its jobs' files): {}\n",
            f.columns.join(", ")
        );
        if !f.metrics.is_empty() {
            out += "  metrics:\n";
            for (m, d) in f.metrics {
                out += &format!("    {m:<24} {d}\n");
            }
        }
        if !f.variant_params().is_empty() {
            out += &format!(
                "  variant parameters (each value a variant of its own in the report, never pooled): {}\n",
                f.variant_params().join(", ")
            );
        }
        if let Some(b) = f.baseline {
            out += &format!("  baseline (not federating; the report's and the summary's FRR divide by it): {b}\n");
        }
        if !f.paper_claims.is_empty() {
            out += "  paper_claimed_epsilon (what the paper's own argument claims for the noise used; a claim, not a \
                    bound):\n";
            for (algo, what) in f.paper_claims {
                out += &format!("    {algo:<20} {what}\n");
            }
        }
    }
    out += "a job may list algorithms and environments of several families: each algorithm runs on the listed environments of its own family\n";
    out += &format!(
        "job-level axis (in grid: only): {}: a list of horizons instead of the top-level horizon:; each \
         horizon's cells have their own checkpoints, summary lines and rows (seed and repetitions stay job-level: \
         the repetitions' keys are shared across cells)\n",
        crate::job::HORIZON_AXIS
    );
    out += "parameters (in params: or grid:):\n";
    for p in params() {
        out += &format!(
            "  {:<17} {}; default {}; {}\n",
            p.name,
            p.kind.describe(),
            p.default_text(),
            p.doc
        );
        out += &format!("  {:<17} used by: {}\n", "", p.used_by.join(", "));
    }
    out
}

/// For each grid axis, the job's algorithms that do not read it (on their
/// environments): each of them is one cell across the axis's values, a
/// reference level, not a cell per value. Empty when every algorithm reads
/// every axis.
fn unread_axes(job: &Job) -> String {
    let Ok(yaml) = serde_yaml::from_str::<serde_yaml::Value>(&job.yaml) else {
        return String::new();
    };
    let Some(grid) = yaml.get("grid").and_then(serde_yaml::Value::as_mapping) else {
        return String::new();
    };
    let mut out = String::new();
    for key in grid.keys().filter_map(serde_yaml::Value::as_str) {
        let Some(def) = crate::algo::family::param(key) else {
            continue;
        };
        let mut unread: Vec<&str> = Vec::new();
        for c in &job.cells {
            let reads = def.used_by.contains(&c.algorithm.as_str()) || def.used_by.contains(&c.environment.as_str());
            if !reads && !unread.contains(&c.algorithm.as_str()) {
                unread.push(&c.algorithm);
            }
        }
        if !unread.is_empty() {
            out += &format!(
                "grid axis {key}: not read by {} (one cell each across its values, a reference level)\n",
                unread.join(", ")
            );
        }
    }
    out
}

fn hms(secs: f64) -> String {
    let s = secs.ceil().max(0.0) as u64;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// The text of `fedbandits validate`: the expanded grid, totals, memory
/// estimate for `threads` worker threads, results directory and the
/// accountant's warnings.
pub fn validate_text(job: &Job, threads: usize) -> String {
    let mut out = job.to_string();
    out += &unread_axes(job);
    let per_fed = crate::sim::max_memory_per_federation(job);
    let rows: u64 = job
        .cells
        .iter()
        .map(|c| u64::from(job.repetitions) * job.checkpoint_rounds_of(c).len() as u64)
        .sum();
    out += &format!(
        "totals: {} cells, {} repetitions each, {} federations, {} agent-steps ({:.3e})\n",
        job.cells.len(),
        job.repetitions,
        job.cells.len() as u64 * u64::from(job.repetitions),
        job.total_agent_steps(),
        job.total_agent_steps() as f64
    );
    out += &format!(
        "memory: up to {} per federation, about {} with {threads} threads (the process, the running \
         federations and the part's assembly); output about {rows} rows\n",
        human(per_fed),
        human(crate::sim::memory::estimate(job, threads, Default::default()))
    );
    let accountant = job.cells.iter().map(|c| c.config.accountant_bytes()).max().unwrap_or(0);
    if accountant > 0 {
        out += &format!(
            "memory: the estimate covers the vector-summation accountant's {} of working memory while it computes \
             figures no cache holds (while loading the job; cached figures need none)\n",
            human(accountant)
        );
    }
    if let Some(why) = crate::sim::memory::too_big(job, threads, Default::default()) {
        out += &format!("warning: run would refuse: {why}\n");
    }
    out += &format!("results: {}\n", job.results_dir().display());
    out += &privacy_table(job);
    for w in privacy_warnings(job).into_iter().chain(job.model_warning_lines()) {
        out += &format!("warning: {w}\n");
    }
    out
}

/// Each private cell's figures before anything runs (the accountant
/// depends only on the configuration): target, `acct_epsilon` (null*, with
/// the reason below), mu, releases per observation, noise multiplier, the
/// zCDP conversion, basic composition and the paper's claim; at most 40
/// lines; then each neighbouring relation and each reason for a null
/// figure once, with the cells it concerns.
fn privacy_table(job: &Job) -> String {
    let fmt = |v: Option<f64>| v.map_or("-".to_string(), crate::privacy::accountant::fmt_epsilon);
    let mut relations: Vec<(String, Vec<usize>)> = Vec::new();
    let mut nulls: Vec<(String, Vec<usize>)> = Vec::new();
    let note = |list: &mut Vec<(String, Vec<usize>)>, text: &str, cell: usize| match list
        .iter_mut()
        .find(|(t, _)| t == text)
    {
        Some((_, cells)) => cells.push(cell),
        None => list.push((text.to_string(), vec![cell])),
    };
    let mut rows = Vec::new();
    for c in &job.cells {
        let Some(a) = c.config.accounting() else { continue };
        let (te, td) = c.config.target();
        note(&mut relations, &a.relation, c.index);
        if let Some(why) = &a.epsilon_null {
            note(&mut nulls, why, c.index);
        }
        // A run without a figure shows its sums' figure where it has one.
        let eps = match (a.epsilon_null.is_some(), a.epsilon_sums) {
            (false, _) => fmt(a.epsilon),
            (true, Some(s)) => format!("null* ({})", crate::privacy::accountant::fmt_epsilon(s)),
            (true, None) => "null*".to_string(),
        };
        rows.push(format!(
            "  {:>4} {:>8} {:>7} {:>15} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8}  {}\n",
            format!("[{}]", c.index),
            fmt(te),
            td.map_or("-".to_string(), |d| format!("{d:.0e}")),
            eps,
            fmt(a.mu),
            a.releases_per_observation,
            fmt(a.noise_multiplier),
            fmt(a.epsilon_zcdp),
            fmt(a.basic.map(|b| b.0)),
            fmt(a.paper_claimed),
            job.short_label(c)
        ));
    }
    if rows.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "privacy per cell (acct_epsilon: exact for everything released, the figure to report; mu: its \
         Gaussian-DP parameter; null* (x): no figure for the run, x for its noisy sums alone; the others looser \
         or claims):\n  {:>4} {:>8} {:>7} {:>15} {:>8} {:>8} {:>10} \
         {:>10} {:>8} {:>8}  cell\n",
        "#", "target", "delta", "acct_epsilon", "mu", "releases", "noise_mult", "zcdp", "basic", "claimed"
    );
    for r in rows.iter().take(40) {
        out += r;
    }
    if rows.len() > 40 {
        out += &format!("  ... ({} more private cells)\n", rows.len() - 40);
    }
    let cells = |v: &[usize]| v.iter().map(|c| format!("[{c}]")).collect::<Vec<_>>().join(" ");
    for (text, v) in &relations {
        out += &format!("  neighbours of {}: {text}\n", cells(v));
    }
    for (why, v) in &nulls {
        out += &format!("  * null acct_epsilon, cells {}: {why}\n", cells(v));
    }
    out
}

/// What `fedbandits plan` is asked: the tasks, their threads, the time
/// model, whether every shard is printed, the `--out` given (repeated in
/// the suggested line) and the units already finished in the results
/// directory (a run reuses them; they are not planned).
pub struct PlanRequest<'a> {
    /// Array tasks (shards).
    pub tasks: usize,
    /// Worker threads per task.
    pub threads: usize,
    /// The time model.
    pub model: &'a crate::sim::cost::TimeModel,
    /// Every shard's line.
    pub all: bool,
    /// `--out` as given.
    pub out: Option<&'a std::path::Path>,
    /// (cell index, repetition) already finished.
    pub finished: &'a std::collections::HashSet<(usize, u32)>,
    /// `--cold-cache`: book the accountant's memory whatever the cache holds.
    pub cold_cache: bool,
}

/// What a task's time limit adds to its estimate x [`TIME_MARGIN`]: the
/// two minutes' warning `slurm/fedbandits.sbatch` asks for (`--signal`,
/// after which a task snapshots and requeues itself) and a minute to start.
pub const TIME_EXTRA_SECONDS: f64 = 180.0;

/// The factor on the estimated time of a task's longest run in its time
/// limit: the time model's measured errors reach 1.45x (`plan` prints
/// them), and a task that runs over is not lost (it snapshots, requeues
/// itself and resumes).
pub const TIME_MARGIN: f64 = 1.5;

/// A task's time limit in seconds for `longest` estimated: x
/// [`TIME_MARGIN`] plus [`TIME_EXTRA_SECONDS`], rounded up to a minute.
pub fn time_limit(longest: f64) -> f64 {
    ((longest * TIME_MARGIN + TIME_EXTRA_SECONDS) / 60.0).ceil() * 60.0
}

/// Slurm's `--mem` for a task the model puts at `bytes`: x
/// [`MEM_HEADROOM`], rounded up to whole MiB, at least [`MEM_FLOOR_MIB`].
pub fn slurm_mem_mib(bytes: u64) -> u64 {
    ((bytes as f64 * MEM_HEADROOM / 1048576.0).ceil() as u64).max(MEM_FLOOR_MIB)
}

/// Headroom of the memory `plan` suggests requesting over its model (the
/// model is within 1.05x-1.4x above the peak resident memory measured;
/// the batch shell and Slurm's own accounting come on top).
pub const MEM_HEADROOM: f64 = 1.25;

/// The least memory `plan` suggests requesting, in MiB (the batch shell,
/// `scontrol` and the engine's start).
pub const MEM_FLOOR_MIB: u64 = 32;

/// The text of `fedbandits plan`. Times come from the engine's time model
/// ([`crate::sim::cost`]): each cell's agent-steps priced by the request's
/// model; finished units are left out.
pub fn plan_text(job: &Job, req: &PlanRequest<'_>) -> String {
    let (tasks, threads) = (req.tasks.max(1), req.threads.max(1));
    let reps = job.repetitions as usize;
    let owner = crate::job::shard::assign_units(&job.cells, job.repetitions, tasks);
    // Per shard: (units, agent-steps, thread-seconds, longest unit's).
    let mut loads = vec![(0usize, 0u64, 0.0f64, 0.0f64); tasks];
    for (u, &s) in owner.iter().enumerate() {
        let cell = &job.cells[u / reps];
        if req.finished.contains(&(cell.index, (u % reps) as u32)) {
            continue;
        }
        let steps = cell.agent_steps_per_rep();
        let secs = crate::sim::cost::thread_seconds(&cell.config, steps, req.model);
        loads[s].0 += 1;
        loads[s].1 += steps;
        loads[s].2 += secs;
        loads[s].3 = loads[s].3.max(secs);
    }
    let units = job.cells.len() * reps;
    let remaining: u64 = loads.iter().map(|l| l.1).sum();
    let mut sorted: Vec<u64> = loads.iter().map(|l| l.1).collect();
    sorted.sort_unstable();
    let max = sorted.last().copied().unwrap_or(0);
    let mean = remaining as f64 / tasks as f64;
    // Wall time of a task: its thread-seconds over its threads, but no less
    // than its longest unit (a repetition runs on one thread).
    let wall = |l: &(usize, u64, f64, f64)| (l.2 / threads as f64).max(l.3);
    let longest = loads.iter().map(wall).fold(0.0, f64::max);
    let total_secs: f64 = loads.iter().map(|l| l.2).sum();
    let limit = time_limit(longest);
    let total = job.total_agent_steps();
    let mut out = format!(
        "job {}: {} cells x {} repetitions = {units} units, {total} agent-steps ({:.3e})\n",
        job.name,
        job.cells.len(),
        job.repetitions,
        total as f64
    );
    if !req.finished.is_empty() {
        out += &format!(
            "finished: {} of {units} units in {} (a run reuses them): planning the remaining {}, {:.3e} agent-steps\n",
            req.finished.len(),
            job.results_dir().display(),
            units - req.finished.len(),
            remaining as f64
        );
    }
    let layouts = crate::output::directory::own_layouts(&job.results_dir(), job);
    let others: Vec<usize> = layouts.into_iter().filter(|&n| n != tasks).collect();
    if remaining > 0 && !others.is_empty() {
        let names: Vec<String> = others.iter().map(|n| format!("part-*-of-{n:05}.parquet")).collect();
        out += &format!(
            "warning: {} holds this job's parts of another shard layout ({}); tasks of {tasks} shards would write \
             theirs beside them, and merge refuses a directory of two layouts: plan and run with --tasks {} (the \
             layout there), or move those parts away first\n",
            job.results_dir().display(),
            names.join(", "),
            others[0]
        );
    }
    out += &format!(
        "tasks {tasks}: agent-steps per task min {:.3e} median {:.3e} max {:.3e} (max / mean {:.3}); {} tasks get no work\n",
        sorted[0] as f64,
        sorted[sorted.len() / 2] as f64,
        max as f64,
        if mean > 0.0 { max as f64 / mean } else { 0.0 },
        loads.iter().filter(|l| l.0 == 0).count()
    );
    out += &busy_warning(job);
    // The largest task's memory, once: both lines state it.
    let (cold, accountant_line) = accountant_booking(job, req.cold_cache);
    let task_bytes = crate::sim::memory::largest_task(job, threads, tasks, cold);
    out += &plan_memory_and_time(job, req, task_bytes, (longest, total_secs));
    out += &accountant_line;
    out += &plan_slurm(job, req, task_bytes, limit);
    out += "shard  units      agent-steps  est. time\n";
    for (i, l) in loads.iter().enumerate() {
        let (u, steps) = (l.0, l.1);
        if req.all || i < 10 || i + 5 >= loads.len() {
            out += &format!("{i:>5}  {u:>5}  {steps:>15}  {}\n", hms(wall(l)));
        } else if i == 10 {
            out += "  ...  (--all prints every shard)\n";
        }
    }
    out
}

/// `plan`'s warning when runs of another version of the job are writing
/// its results directory now: every task of this version would refuse to
/// start (`run` refuses to mix two versions).
fn busy_warning(job: &Job) -> String {
    let dir = job.results_dir();
    let others: Vec<String> = crate::output::lock::peek_writers(&dir)
        .into_iter()
        .filter(|w| w.identity != job.identity())
        .map(|w| w.to_string())
        .collect();
    if others.is_empty() {
        return String::new();
    }
    format!(
        "warning: {} is being written by {} run(s) of another version of job {} ({}): every task of this \
         version would refuse to start until they end. Wait for them (or cancel them), or plan and submit with \
         --out / FEDBANDITS_OUT set to another directory\n",
        dir.display(),
        others.len(),
        job.name,
        others.join("; ")
    )
}

/// Whether tasks must book the vector-summation accountant's working
/// memory (true when a task may compute figures no cache holds), and the
/// line that says why. `plan` loaded the job, so every figure it needs has
/// been computed or read by now: in the cache file unless caching is off,
/// this process could not store one, or `--cold-cache`.
fn accountant_booking(job: &Job, cold_cache: bool) -> (bool, String) {
    let bytes = job.cells.iter().map(|c| c.config.accountant_bytes()).max().unwrap_or(0);
    if bytes == 0 {
        return (false, String::new());
    }
    let used = crate::privacy::binomial_gdp::figures_used();
    let file = crate::privacy::binomial_gdp::cache_file();
    let amount = human(bytes);
    let why = match (&file, used.not_stored) {
        _ if cold_cache => "--cold-cache".to_string(),
        (None, _) => "the accountant's cache is off (FEDBANDITS_ACCOUNTANT_CACHE=0 or no cache directory)".into(),
        (Some(_), n) if n > 0 => format!("{n} figure(s) could not be stored in the accountant's cache"),
        (Some(f), _) => {
            let line = format!(
                "memory: booked without the vector-summation accountant's {amount}: the {} figure(s) this job needs \
                 are in the accountant's cache {} ({} of them computed by this plan); a task that cannot read that \
                 file computes them with {amount} more: plan with --cold-cache to book it\n",
                used.used,
                f.display(),
                used.used - used.from_cache
            );
            return (false, line);
        }
    };
    (
        true,
        format!("memory: booked with the vector-summation accountant's {amount} (tasks compute its figures): {why}\n"),
    )
}

/// `plan`'s memory and time lines.
fn plan_memory_and_time(
    job: &Job,
    req: &PlanRequest<'_>,
    task_bytes: u64,
    (longest, total_secs): (f64, f64),
) -> String {
    let threads = req.threads.max(1);
    let mut out = format!(
        "memory per task: about {} ({threads} threads x {} per federation, the process and the part's \
         assembly; the same model as validate)\n",
        human(task_bytes),
        human(crate::sim::max_memory_per_federation(job))
    );
    // A small total keeps a decimal (a pilot's 1 s against 2.8 s measured
    // read as 1).
    let prec = if total_secs < 100.0 { 1 } else { 0 };
    out += &format!(
        "time per task: longest {} (total {:.2} core-hours = {:.prec$} CPU-seconds) at {}\n",
        hms(longest),
        total_secs / 3600.0,
        total_secs,
        req.model.source
    );
    out += &format!("time model: {}\n", req.model.error);
    out
}

/// `plan`'s results, Slurm request and suggested lines: the request is
/// what `slurm/submit.sh` passes to sbatch (it reads the `slurm request:`
/// line), and the suggested line, pasted as it is, submits this plan.
fn plan_slurm(job: &Job, req: &PlanRequest<'_>, task_bytes: u64, limit: f64) -> String {
    let (tasks, threads) = (req.tasks.max(1), req.threads.max(1));
    let mem = slurm_mem_mib(task_bytes);
    let (merge_mem, merge_secs) = crate::sim::memory::merge_estimate(job);
    let merge = format!("--time={} --mem={}M", hms(merge_secs), slurm_mem_mib(merge_mem));
    let array = format!("--cpus-per-task={threads} --time={} --mem={mem}M", hms(limit));
    let out_var = req
        .out
        .map(|o| {
            format!(
                "FEDBANDITS_OUT={} ",
                crate::sim::merge::shell_word(&o.display().to_string())
            )
        })
        .unwrap_or_default();
    format!(
        "results: {}\njob identity: {}\nslurm request: array {array}; merge {merge} (--mem: the model x \
         {MEM_HEADROOM}, at least {MEM_FLOOR_MIB} MiB; --time: the estimate x {TIME_MARGIN} plus {} minutes, the \
         warning a task snapshots in and its start; FEDBANDITS_MEM, FEDBANDITS_TIME, FEDBANDITS_MERGE_MEM and \
         FEDBANDITS_MERGE_TIME override)\nsuggested: FEDBANDITS_TASKS={tasks} FEDBANDITS_THREADS={threads} {out_var}slurm/submit.sh {}   \
         (sbatch --array=0-{} {array}; merge job {merge})\n",
        job.results_dir().display(),
        job.identity(),
        TIME_EXTRA_SECONDS / 60.0,
        crate::sim::merge::shell_word(&job.path.display().to_string()),
        tasks - 1
    )
}

/// The accountant's warnings over a job's cells, each once, with how many
/// cells it concerns and the first of them.
pub(super) fn privacy_warnings(job: &Job) -> Vec<String> {
    let mut seen: Vec<(String, usize, String)> = Vec::new();
    for cell in &job.cells {
        let Some(a) = cell.config.accounting() else { continue };
        for w in a.warnings {
            match seen.iter_mut().find(|(s, _, _)| *s == w) {
                Some((_, n, _)) => *n += 1,
                None => seen.push((w, 1, job.short_label(cell))),
            }
        }
    }
    seen.into_iter()
        .map(|(w, n, first)| {
            let cells = if n == 1 {
                "cell".to_string()
            } else {
                format!("{n} cells, e.g.")
            };
            format!("privacy ({cells} {first}): {w}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::validate_text;
    use crate::job::Job;

    /// An axis some algorithms do not read is named with them: they run
    /// once across its values (3 cells, not 4), and `validate` says so.
    #[test]
    fn validate_names_the_algorithms_an_axis_does_not_reach() {
        let text = "name: a\nhorizon: 50\nalgorithm: [local_ucb, gossip_ucb]\nenvironment: mab_heterogeneous\n\
                    params: {m: 4, arms: 3}\ngrid: {graph: [complete, ring], confidence_scale: [1, 2]}\n";
        let job = Job::parse(std::path::Path::new("a.yaml"), text).expect("parses");
        assert_eq!(
            job.cells.len(),
            6,
            "local_ucb: 2 cells (confidence_scale), gossip_ucb: 4"
        );
        let out = validate_text(&job, 1);
        assert!(
            out.contains("grid axis graph: not read by local_ucb (one cell each across its values"),
            "{out}"
        );
        assert!(!out.contains("grid axis confidence_scale"), "{out}");
    }
}
