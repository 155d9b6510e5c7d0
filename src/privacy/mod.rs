//! Privacy mechanisms: the tree-based (binary counter) aggregation and the
//! Gaussian noise calibrations of the linear family; the binary partial-sum
//! mechanism (Laplace) of the gossip family.

pub mod accountant;
pub mod audit;
pub mod binomial_gdp;
pub mod bits;
pub mod gdp;
pub mod lattice;
pub mod lattice_gdp;
pub mod partial_sum;
pub mod sensitivity;
pub mod tree;
pub mod tree_lattice;
pub mod vecsum;
pub mod vecsum_account;

/// Levels of a binary-counter tree that must hold `leaves` leaves:
/// floor(log2 leaves) + 1 (at least 1).
pub fn tree_levels(leaves: u64) -> usize {
    (63 - leaves.max(1).leading_zeros()) as usize + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels() {
        assert_eq!(tree_levels(1), 1);
        assert_eq!(tree_levels(2), 2);
        assert_eq!(tree_levels(3), 2);
        assert_eq!(tree_levels(4), 3);
        assert_eq!(tree_levels(400), 9);
        assert_eq!(tree_levels(10_000_000), 24);
    }
}
