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

impl FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let err = || format!("invalid shard '{s}': expected I/N with 0 <= I < N, e.g. 0/4");
        let (a, b) = s.split_once('/').ok_or_else(err)?;
        let index: usize = a.trim().parse().map_err(|_| err())?;
        let count: usize = b.trim().parse().map_err(|_| err())?;
        if count == 0 || index >= count {
            return Err(err());
        }
        Ok(Self { index, count })
    }
}

/// The shard of each cell (indexed like `cells`).
pub fn assign(cells: &[Cell], count: usize, reps: u32) -> Vec<usize> {
    let mut order: Vec<usize> = (0..cells.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(cells[i].agent_steps_per_rep() * u64::from(reps)), i));
    let mut load = vec![0u64; count.max(1)];
    let mut out = vec![0; cells.len()];
    for i in order {
        let (s, _) = load.iter().enumerate().min_by_key(|&(s, l)| (*l, s)).unwrap_or((0, &0));
        out[i] = s;
        load[s] += cells[i].agent_steps_per_rep() * u64::from(reps);
    }
    out
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
    }
}
