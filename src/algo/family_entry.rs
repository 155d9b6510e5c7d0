//! What a family's registry entry holds ([`Family`]): its algorithms and
//! environments, output columns, resolver, baseline, growth regret, paper
//! claims, bench and parity workloads, variant parameters and non-private
//! counterparts. Each family's folder defines its entry against this type;
//! the registry that lists them is [`super::family`] (kept apart so that the
//! families and the registry form no import cycle).

use super::params::{ParamDef, SHARED, Share};

/// A family: its algorithms, environments, parameters and the metric
/// columns it adds to the output (beyond the regret columns every family
/// writes). Its own parameters name the members they apply to
/// ([`ParamDef::used_by`]), and its uses of the shared ones say the same
/// ([`Share`]). The job loader, `fedbandits list`, the Parquet schema and
/// the analysis package read this registry.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    /// Name in `fedbandits list` (unique: two names are one family exactly
    /// when their families' names are equal).
    pub name: &'static str,
    /// One line.
    pub doc: &'static str,
    /// (name, description).
    pub algorithms: &'static [(&'static str, &'static str)],
    /// (name, description).
    pub environments: &'static [(&'static str, &'static str)],
    /// Its own parameters (`table.rs` of its folder), in output-column
    /// order: no other family declares one of these names.
    pub params: &'static [ParamDef],
    /// Its members' uses of the parameters shared between families
    /// ([`super::params::SHARED`]), with their defaults for them.
    pub shares: &'static [Share],
    /// Output columns not every family fills, this family's (another
    /// family may fill one too): a job's files carry those of its families
    /// only (`output::job_schema`), null in its cells of another.
    pub columns: &'static [&'static str],
    /// Resolves a cell's raw parameters into its configuration.
    pub resolve: Resolve,
    /// The algorithm without federation whose cell, with the same
    /// parameters, is the denominator of the federated regret ratio (FRR)
    /// the run summary prints for the family's other algorithms.
    pub baseline: Option<&'static str>,
    /// The cumulative regret whose growth over the last decade of the
    /// horizon the column `regret_exponent` measures
    /// ([`crate::algo::curve::growth_exponent`]): `group_regret`, or a
    /// metric column where a fixed cost paid early would hide a stall (the
    /// combinatorial family's exploration phase).
    pub growth_regret: &'static str,
    /// What `paper_claimed_epsilon` is for each of its private algorithms
    /// (algorithm, definition): a claim of the paper, never a bound; listed
    /// by `fedbandits list`.
    pub paper_claims: &'static [(&'static str, &'static str)],
    /// Its `fedbandits bench` workloads: (name, default federations, job
    /// YAML with `{T}` for the rounds).
    pub workloads: &'static [(&'static str, u32, &'static str)],
    /// Short jobs covering its algorithms and environments, for the parity
    /// check of a batched backend with the CPU: (name, job YAML).
    pub parity: &'static [(&'static str, &'static str)],
    /// (private algorithm, the non-private algorithm it privatizes) where
    /// privacy is a separate algorithm rather than `private: false`: the
    /// counterpart whose regret the cost of privacy is measured against.
    pub non_private: &'static [(&'static str, &'static str)],
    /// The parts of a private algorithm beyond its noise that the report
    /// prices one at a time (algorithm, parameter, the value that switches
    /// the part off, what the part is): Fed_UCB's `c_priv: 0` (the
    /// privacy term of its width) and `clip: false` (clipping). With
    /// `noise: false` cells, the report splits a private cell's cost
    /// against its non-private counterpart into its noise, each part and
    /// the rest of the algorithm.
    pub parts: &'static [(&'static str, &'static str, &'static str, &'static str)],
    /// Private algorithms whose `epsilon: .inf` draws no noise and keeps
    /// every other part (P-FCB's schedule and acceptance window): the
    /// report's noise-free twin of a private cell where the study has no
    /// `noise: false` cell. (Fed_UCB's `.inf` also switches clipping and
    /// its width's privacy term off, so it is not.)
    pub noiseless_at_inf: &'static [&'static str],
    /// (column, definition) of each of its metrics: what it measures, its
    /// unit, and when it is null; `list`, README and the report's family
    /// metrics section read them from here.
    pub metrics: &'static [(&'static str, &'static str)],
    /// (algorithm, the parameters that widen its confidence width): what
    /// to turn where a cell never starts learning within the horizon
    /// (the report's stall verdict names them with the cell's values).
    pub widths: &'static [(&'static str, &'static [&'static str])],
    /// Its CUDA kernel sources (none: the family runs on the CPU only).
    pub kernels: &'static [crate::backend::cuda::nvrtc::KernelSource],
    /// Its time model's terms (at most [`super::cell::MAX_COST_TERMS`]): a
    /// cell's [`super::Cost`] says how many units of each an agent-step
    /// does, and `plan` prices them at these built-in seconds or at this
    /// machine's fit.
    pub cost_terms: &'static [CostTerm],
    /// Jobs spanning those terms, which `fedbandits calibrate --shapes`
    /// times on one thread to fit the terms' seconds on the user's machine:
    /// (name, job YAML with `{T}` for the horizon, the first horizon tried).
    pub shapes: &'static [(&'static str, &'static str, u64)],
    /// Its micro-benchmarks (`fedbandits bench --kernels`, `--linalg`):
    /// (which, the benchmark, handed a line printer).
    pub micro_benches: &'static [(&'static str, MicroBench)],
    /// Its multi-round kernels' launch shapes on a device whose blocks may
    /// use the given shared memory, for the static occupancy table
    /// (`fedbandits calibrate --occupancy-table`; [`no_static_shapes`]
    /// where it has none).
    pub static_shapes: fn(usize) -> Vec<StaticShape>,
}

/// One row of a family's static occupancy table: a kernel as the host
/// launches it for one environment at the family's reference shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticShape {
    /// The kernel.
    pub kernel: &'static str,
    /// The environment (its launch shape depends on it).
    pub environment: &'static str,
    /// Threads per block.
    pub threads: usize,
    /// Dynamic shared memory per block, bytes (None: the shape does not fit
    /// the device's limit).
    pub shared: Option<usize>,
}

/// A family without multi-round kernels to table.
pub fn no_static_shapes(_shared_limit: usize) -> Vec<StaticShape> {
    Vec::new()
}

/// A family's micro-benchmark: times its kernels and hands each line of
/// results to the printer.
pub type MicroBench = fn(&mut dyn FnMut(&str));

/// One term of a family's time model: a unit of work and its built-in
/// price.
#[derive(Clone, Copy, Debug)]
pub struct CostTerm {
    /// Name (in `calibrate --shapes`' table and the calibration file).
    pub name: &'static str,
    /// What one unit is.
    pub unit: &'static str,
    /// Seconds per unit on one thread of the development VM (the
    /// family's doc comment says how they were fitted).
    pub seconds: f64,
}

impl CostTerm {
    /// A term: its name, its unit and its built-in seconds per unit.
    pub const fn new(name: &'static str, unit: &'static str, seconds: f64) -> Self {
        Self { name, unit, seconds }
    }
}

/// A family's parameter resolution: reads a cell's parameters through
/// [`super::resolve::Params`] (which holds the cell's algorithm,
/// environment, horizon and the job file's folder, and records what it
/// resolves and every problem) and builds the cell's configuration; the
/// registry's dispatcher ([`crate::algo::family::resolve`]) makes the
/// reader and finishes it.
pub type Resolve = fn(&mut super::resolve::Params<'_>) -> Box<dyn super::FamilyConfig>;

impl Family {
    /// A family of these members, parameters and resolver with every other
    /// field empty (no baseline, `group_regret` as its growth regret, no
    /// claims, workloads, parity jobs, columns, parts, metrics, widths,
    /// kernels, cost terms, shapes, micro-benchmarks or static shapes): a family's entry
    /// writes what it has and takes the rest from here (`..Family::new(..)`).
    pub const fn new(
        (name, doc): (&'static str, &'static str),
        algorithms: &'static [(&'static str, &'static str)],
        environments: &'static [(&'static str, &'static str)],
        (params, shares): (&'static [ParamDef], &'static [Share]),
        resolve: Resolve,
    ) -> Self {
        Self {
            name,
            doc,
            algorithms,
            environments,
            params,
            shares,
            columns: &[],
            resolve,
            baseline: None,
            growth_regret: "group_regret",
            paper_claims: &[],
            workloads: &[],
            parity: &[],
            non_private: &[],
            parts: &[],
            noiseless_at_inf: &[],
            metrics: &[],
            widths: &[],
            kernels: &[],
            cost_terms: &[],
            shapes: &[],
            micro_benches: &[],
            static_shapes: no_static_shapes,
        }
    }

    /// The parameters its algorithms and environments use (the shared ones
    /// it uses, then its own), in output-column order.
    pub fn parameters(&self) -> Vec<&'static str> {
        self.definitions().map(|p| p.name).collect()
    }

    /// Its parameters that make a variant of an algorithm
    /// ([`super::params::ParamDef::variant`]), in output-column order.
    pub fn variant_params(&self) -> Vec<&'static str> {
        self.definitions().filter(|d| d.variant).map(|p| p.name).collect()
    }

    /// The definitions of [`Family::parameters`].
    fn definitions(&self) -> impl Iterator<Item = &'static ParamDef> + '_ {
        SHARED
            .iter()
            .filter(|p| self.shares.iter().any(|s| s.params.contains(&p.name)))
            .chain(self.params)
    }
}

#[cfg(test)]
mod tests {
    use crate::algo::family::FAMILIES;

    /// The registry's names are the engine's: every `widths` entry names one of the
    /// family's algorithms and parameters that algorithm uses, and every
    /// `non_private` pair names two of its algorithms.
    #[test]
    fn registry_names_what_the_family_has() {
        for f in FAMILIES {
            let algos: Vec<&str> = f.algorithms.iter().map(|a| a.0).collect();
            for (algo, widths) in f.widths {
                assert!(algos.contains(algo), "{}: widths names {algo}", f.name);
                for w in *widths {
                    let def = crate::algo::family::param(w).unwrap_or_else(|| panic!("{w} is no parameter"));
                    let uses = def.used_by.contains(algo) || f.environments.iter().any(|e| def.used_by.contains(&e.0));
                    assert!(uses, "{}: {algo} does not use {w}", f.name);
                }
            }
            for (p, n) in f.non_private {
                assert!(algos.contains(p) && algos.contains(n), "{}: {p} -> {n}", f.name);
            }
            for (m, _) in f.metrics {
                assert!(
                    f.columns.contains(m),
                    "{}: metric {m} is not one of its columns",
                    f.name
                );
            }
            if let Some(b) = f.baseline {
                assert!(algos.contains(&b), "{}: baseline {b}", f.name);
            }
        }
    }
}
