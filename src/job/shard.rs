//! Deterministic, cost-balanced assignment of cells to shards.
//!
//! Cells are sorted by cost (agent-steps, descending; ties by cell index) and
//! each goes to the shard with the least total cost so far (ties: lowest
//! shard). The assignment depends only on the job, so every task of an array
//! computes the same table.

use super::Cell;
use std::str::FromStr;

/// A shard selector `I/N` (0-based I < N).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This shard.
    pub index: usize,
    /// Number of shards.
    pub count: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Self { index: 0, count: 1 }
    }
}

/// The most shards (array tasks) a run or plan accepts: a job has at most
/// [`super::MAX_UNITS`] repetition units, so a shard beyond them can never
/// get work; refused before anything is sized by N.
pub const MAX_SHARDS: usize = super::MAX_UNITS as usize;

/// A `--shard` value that is not a shard.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// Not `I/N` with 0 <= I < N.
    #[error("invalid shard '{0}': expected I/N with 0 <= I < N <= {MAX_SHARDS}, e.g. 0/4")]
    Syntax(String),
    /// N above [`MAX_SHARDS`].
    #[error(
        "invalid shard '{text}': N = {count} exceeds {MAX_SHARDS}, the most repetition units a job can have (a shard \
         beyond a job's units gets no work); use N <= {MAX_SHARDS}, at most the job's units (`fedbandits validate` \
         prints them)"
    )]
    TooMany {
        /// The value given.
        text: String,
        /// Its N.
        count: usize,
    },
}

impl FromStr for Shard {
    type Err = ShardError;
    fn from_str(s: &str) -> Result<Self, ShardError> {
        let err = || ShardError::Syntax(s.to_owned());
        let (a, b) = s.split_once('/').ok_or_else(err)?;
        let index: usize = a.trim().parse().map_err(|_| err())?;
        let count: usize = b.trim().parse().map_err(|_| err())?;
        if count == 0 || index >= count {
            return Err(err());
        }
        if count > MAX_SHARDS {
            return Err(ShardError::TooMany {
                text: s.to_owned(),
                count,
            });
        }
        Ok(Self { index, count })
    }
}

/// The shard of each (cell, repetition) unit; unit u is repetition
/// u % reps of cell u / reps. Longest-processing-time-first: units by cost
/// (agent-steps) descending, ties by unit index, each to the least-loaded
/// shard (ties: lowest shard).
pub fn assign_units(cells: &[Cell], reps: u32, count: usize) -> Vec<usize> {
    let reps = reps as usize;
    let n = cells.len() * reps;
    let cost = |u: usize| cells[u / reps].agent_steps_per_rep();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&u| (std::cmp::Reverse(cost(u)), u));
    // Shards beyond the n units get none (each unit goes to an empty shard
    // while one is left, the lowest first), so only min(count, n) matter:
    // nothing is sized by count.
    let count = count.min(n).max(1);
    // A binary heap of (load, shard) keeps this O(n log count).
    let mut heap: std::collections::BinaryHeap<std::cmp::Reverse<(u64, usize)>> =
        (0..count).map(|s| std::cmp::Reverse((0, s))).collect();
    let mut out = vec![0; n];
    for u in order {
        if let Some(std::cmp::Reverse((load, s))) = heap.pop() {
            out[u] = s;
            heap.push(std::cmp::Reverse((load + cost(u), s)));
        }
    }
    out
}

/// Per shard: (units, agent-steps).
pub fn shard_loads(cells: &[Cell], reps: u32, count: usize) -> Vec<(usize, u64)> {
    let owner = assign_units(cells, reps, count);
    let mut loads = vec![(0usize, 0u64); count.clamp(1, MAX_SHARDS)];
    for (u, &s) in owner.iter().enumerate() {
        loads[s].0 += 1;
        loads[s].1 += cells[u / reps as usize].agent_steps_per_rep();
    }
    loads
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_shards() {
        assert_eq!("1/4".parse::<Shard>().unwrap(), Shard { index: 1, count: 4 });
        assert!("4/4".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
        assert!("0/0".parse::<Shard>().is_err());
        // Issue 39: N beyond the most units a job can have is refused
        // (it crashed allocating by N).
        for s in ["0/1000001", "0/99999999999", "0/18446744073709551615"] {
            let e = s.parse::<Shard>().unwrap_err();
            assert!(
                matches!(e, ShardError::TooMany { .. }) && e.to_string().contains("exceeds 1000000"),
                "{e}"
            );
        }
        assert_eq!("999999/1000000".parse::<Shard>().map(|s| s.count), Ok(1_000_000));
    }
}
