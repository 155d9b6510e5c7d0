//! The tree-based mechanism (binary counter; Dwork et al. 2010, Chan et al.
//! 2011) used by both linear-family papers, with noise regenerated from keys.
//!
//! Leaves arrive one at a time (an agent's batch or sync contribution, as a
//! flat vector: the d x d Gram part followed by the d bias entries). In the
//! textbook form leaf k (1-based) closes the p-sum at level i_k (the index of
//! the lowest set bit of k), a node covering leaves k - 2^{i_k} + 1 ..= k, and
//! the release after leaf k is the sum over the set bits j of k of
//! (p-sum_j + noise_j): the exact prefix sum plus the noise of popcount(k)
//! <= floor(log2 k) + 1 nodes, each leaf in at most one live node per level.
//!
//! Here the sum of the live p-sums is kept as what it is, the exact running
//! sum of all leaves, and a node's noise is a pure function of its key
//! (agent noise key, node), where the node is named by the leaf that closed
//! it: for the set bit j of k that is (k >> j) << j. So the release is
//! `sum + sum over live nodes of noise(node)`, every node's noise is the same
//! each time it is used (drawn "once" in the mechanism's sense), and nothing
//! per level is stored: an agent's privacy state is one width-vector,
//! O(d^2), whatever the horizon (before: 2 x levels x width). The cost moves
//! to regenerating popcount(k) nodes' noise per release, which the noise
//! functions do entry by entry ([`crate::rng::normal_at`]), so a GPU thread
//! per entry computes the same bits.

use thiserror::Error;

/// The tree was given more leaves than its levels can hold.
#[derive(Debug, Clone, Copy, Error, PartialEq, Eq)]
#[error("tree with {levels} levels cannot take leaf {leaf}")]
pub struct TreeFull {
    /// Levels of the tree.
    pub levels: usize,
    /// The leaf that did not fit.
    pub leaf: u64,
}

/// One agent's binary-counter tree: the exact running sum and the leaf count.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Tree {
    levels: usize,
    leaves: u64,
    sum: Vec<f64>,
}

impl Tree {
    /// A tree for vectors of `width` entries and up to 2^levels - 1 leaves.
    pub fn new(width: usize, levels: usize) -> Self {
        Self {
            levels,
            leaves: 0,
            sum: vec![0.0; width],
        }
    }

    /// Leaves inserted so far.
    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    /// Inserts the next leaf.
    pub fn insert(&mut self, leaf: &[f64]) -> Result<(), TreeFull> {
        let k = self.leaves + 1;
        if k.trailing_zeros() as usize >= self.levels {
            return Err(TreeFull {
                levels: self.levels,
                leaf: k,
            });
        }
        for (s, l) in self.sum.iter_mut().zip(leaf) {
            *s += l;
        }
        self.leaves = k;
        Ok(())
    }

    /// The live nodes of the current release, lowest level first: each is
    /// named by the leaf that closed it.
    pub fn nodes_used(&self) -> impl Iterator<Item = u64> + '_ {
        live_nodes(self.leaves)
    }

    /// Adds the exact prefix sum to `out`.
    pub fn add_sum(&self, out: &mut [f64]) {
        for (o, s) in out.iter_mut().zip(&self.sum) {
            *o += s;
        }
    }
}

/// The live nodes after `leaves` leaves (one per set bit, lowest first),
/// each named by the leaf that closed it.
pub fn live_nodes(leaves: u64) -> impl Iterator<Item = u64> {
    (0..64)
        .filter(move |j| (leaves >> j) & 1 == 1)
        .map(move |j| (leaves >> j) << j)
}

/// The trees of a federation's M agents with their noise keys (one per
/// agent, from the algorithm's key, agent and purpose).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct AgentTrees {
    trees: Vec<Tree>,
    keys: Vec<u64>,
    /// One node's noise (workspace).
    z: Vec<f64>,
}

impl AgentTrees {
    /// The key of agent `i`'s noise.
    pub fn noise_key(algo_key: &[u64], i: usize) -> Vec<u64> {
        let mut k = algo_key.to_vec();
        k.extend_from_slice(&[i as u64, crate::rng::Purpose::PrivacyNoise as u64]);
        k
    }

    /// The key of the noise of agent `i`'s node `node`:
    /// `fold_key(noise_key(algo_key, i) ++ [node])`.
    pub fn node_key(agent_key: u64, node: u64) -> u64 {
        crate::rng::fold_more(agent_key, node)
    }

    /// Trees for `m` agents.
    pub fn new(m: usize, width: usize, levels: usize, algo_key: &[u64]) -> Self {
        Self {
            trees: (0..m).map(|_| Tree::new(width, levels)).collect(),
            keys: (0..m)
                .map(|i| crate::rng::fold_key(&Self::noise_key(algo_key, i)))
                .collect(),
            z: vec![0.0; width],
        }
    }

    /// Trees for agents whose folded noise keys are `keys` (one per agent).
    pub fn with_keys(keys: Vec<u64>, width: usize, levels: usize) -> Self {
        Self {
            trees: (0..keys.len()).map(|_| Tree::new(width, levels)).collect(),
            keys,
            z: vec![0.0; width],
        }
    }

    /// Inserts agent `i`'s next leaf and adds the agent's release (exact
    /// prefix sum plus the noise of its live nodes, each filled by
    /// `draw(node_noise, node_key)`) to `out`.
    pub fn contribute(
        &mut self,
        i: usize,
        leaf: &[f64],
        out: &mut [f64],
        mut draw: impl FnMut(&mut [f64], u64),
    ) -> Result<(), TreeFull> {
        let tree = &mut self.trees[i];
        tree.insert(leaf)?;
        tree.add_sum(out);
        for node in live_nodes(tree.leaves) {
            draw(&mut self.z, Self::node_key(self.keys[i], node));
            for (o, z) in out.iter_mut().zip(&self.z) {
                *o += z;
            }
        }
        Ok(())
    }
}

/// Fills one tree node's noise for a flat (d x d Gram, d bias) leaf, entry
/// by entry a pure function of the node's key (so a GPU thread per entry
/// computes the same bits): Z_e = sigma normal_at(key, e) for every entry,
/// then the Gram part is symmetrized, (Z + Z^T)/2 (Zhou & Chowdhury's node
/// noise, as in the authors' code).
pub fn symmetric_gaussian(z: &mut [f64], d: usize, sigma: f64, key: u64) {
    debug_assert_eq!(z.len(), d * d + d);
    for (e, v) in z.iter_mut().enumerate() {
        *v = sigma * crate::rng::normal_at(key, e as u64);
    }
    for i in 0..d {
        for j in i + 1..d {
            let s = 0.5 * (z[i * d + j] + z[j * d + i]);
            z[i * d + j] = s;
            z[j * d + i] = s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{Stream, normal_at};

    /// The textbook tree (stored p-sums and node noise drawn when the node is
    /// created), as the reference the key-regenerated form must equal.
    struct Textbook {
        psum: Vec<Vec<f64>>,
        noise: Vec<Vec<f64>>,
        leaves: u64,
    }

    impl Textbook {
        fn insert(&mut self, leaf: &[f64], key: u64) {
            let k = self.leaves + 1;
            let level = k.trailing_zeros() as usize;
            let mut node = leaf.to_vec();
            for j in 0..level {
                for (n, p) in node.iter_mut().zip(&self.psum[j]) {
                    *n += p;
                }
                self.psum[j].fill(0.0);
                self.noise[j].fill(0.0);
            }
            self.psum[level] = node;
            let nk = AgentTrees::node_key(key, k);
            self.noise[level] = (0..leaf.len() as u64).map(|e| normal_at(nk, e)).collect();
            self.leaves = k;
        }

        fn release(&self) -> Vec<f64> {
            let mut out = vec![0.0; self.psum[0].len()];
            for j in 0..self.psum.len() {
                if (self.leaves >> j) & 1 == 1 {
                    for (o, (p, z)) in out.iter_mut().zip(self.psum[j].iter().zip(&self.noise[j])) {
                        *o += p + z;
                    }
                }
            }
            out
        }
    }

    #[test]
    fn release_equals_the_textbook_tree() {
        let (width, levels) = (3, 8);
        let mut trees = AgentTrees::new(1, width, levels, &[5, 6]);
        let key = trees.keys[0];
        let mut book = Textbook {
            psum: vec![vec![0.0; width]; levels],
            noise: vec![vec![0.0; width]; levels],
            leaves: 0,
        };
        let mut s = Stream::new(&[11]);
        for k in 1..=255u64 {
            let leaf: Vec<f64> = (0..width).map(|_| s.uniform()).collect();
            book.insert(&leaf, key);
            let mut rel = vec![0.0; width];
            trees
                .contribute(0, &leaf, &mut rel, |z, nk| {
                    for (e, v) in z.iter_mut().enumerate() {
                        *v = normal_at(nk, e as u64);
                    }
                })
                .unwrap();
            let used: Vec<u64> = trees.trees[0].nodes_used().collect();
            assert_eq!(used.len(), k.count_ones() as usize);
            assert!(used.len() <= (63 - k.leading_zeros()) as usize + 1);
            for (a, b) in rel.iter().zip(book.release()) {
                // Same noise bits; only the order of the exact sums differs.
                assert!((a - b).abs() < 1e-12, "k={k}: {a} vs {b}");
            }
        }
        let err = trees.contribute(0, &[0.0; 3], &mut [0.0; 3], |_, _| {});
        assert_eq!(
            err,
            Err(TreeFull { levels: 8, leaf: 256 }),
            "leaf 256 must not fit 8 levels"
        );
    }

    #[test]
    fn a_node_keeps_its_noise_while_live_and_nodes_differ() {
        // Leaf 4 closes node 4 (level 2); it stays live through leaf 7, with
        // the same key each time, and distinct from the other nodes' keys.
        let used: Vec<Vec<u64>> = (4..=7).map(|k| live_nodes(k).collect()).collect();
        assert_eq!(used, vec![vec![4], vec![5, 4], vec![6, 4], vec![7, 6, 4]]);
        let key = crate::rng::fold_key(&[1, 2]);
        assert_eq!(AgentTrees::node_key(key, 4), crate::rng::fold_key(&[1, 2, 4]));
        assert_ne!(AgentTrees::node_key(key, 4), AgentTrees::node_key(key, 6));
    }

    #[test]
    fn state_is_one_vector_per_agent() {
        let t = AgentTrees::new(100, 16_512, 25, &[1]);
        let floats: usize = t.trees.iter().map(|x| x.sum.len()).sum::<usize>() + t.z.len();
        assert_eq!(floats, 101 * 16_512);
    }
}
