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
//! it: for the set bit j of k that is (k >> j) << j. Beside it each agent
//! keeps the running sum of its live nodes' noise: leaf k subtracts the
//! noise of the i_k nodes it closes (the live nodes of k - 1 below level
//! i_k, regenerated from their keys) and adds the noise of node k; at a
//! power of two every earlier node closes and the sum restarts as node k's
//! noise exactly (so rounding cannot accumulate across powers of two). The
//! release is `sum + noise`: every node's noise is the same each time it is
//! used (drawn "once" in the mechanism's sense), nothing per level is
//! stored (two width-vectors per agent, O(d^2), whatever the horizon), and
//! a release regenerates i_k + 1 nodes, two on average, instead of the
//! popcount(k) live ones (about log2(k) / 2). The noise functions fill a
//! node in vectorized blocks ([`crate::rng::keyed`]), entry by entry a pure
//! function of (node key, entry), so a GPU thread per entry computes the
//! same bits (`fb_tree_insert` in `kernels/linear.cu`).

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

/// One agent's binary-counter tree: the exact running sum of its leaves,
/// the running sum of its live nodes' noise, and the leaf count.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Tree {
    levels: usize,
    leaves: u64,
    sum: Vec<f64>,
    noise: Vec<f64>,
}

impl Tree {
    /// A tree for vectors of `width` entries and up to 2^levels - 1 leaves.
    pub fn new(width: usize, levels: usize) -> Self {
        Self {
            levels,
            leaves: 0,
            sum: vec![0.0; width],
            noise: vec![0.0; width],
        }
    }

    /// Leaves inserted so far.
    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    /// Inserts the next leaf into the exact sum (the noise sum is the
    /// caller's: [`AgentTrees::contribute`]).
    fn insert(&mut self, leaf: &[f64]) -> Result<u64, TreeFull> {
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
        Ok(k)
    }

    /// The live nodes of the current release, lowest level first: each is
    /// named by the leaf that closed it.
    pub fn nodes_used(&self) -> impl Iterator<Item = u64> + '_ {
        live_nodes(self.leaves)
    }

    /// Adds the release, exact prefix sum plus the live nodes' noise, to
    /// `out` (sum first, then noise, entry by entry).
    pub fn add_release(&self, out: &mut [f64]) {
        for (o, (s, z)) in out.iter_mut().zip(self.sum.iter().zip(&self.noise)) {
            *o += s;
            *o += z;
        }
    }
}

/// The nodes leaf `k` closes (lowest level first): the live nodes of
/// `k - 1` below the level of `k`'s lowest set bit.
pub fn closed_nodes(k: u64) -> impl Iterator<Item = u64> {
    (0..k.trailing_zeros()).map(move |j| ((k - 1) >> j) << j)
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

    /// The folded noise keys of `per_federation` trees (agents, or slots)
    /// of every federation, federation-major: `fold_key(noise_key(k, i))`.
    pub fn folded_keys(algo_keys: &[Vec<u64>], per_federation: usize) -> Vec<u64> {
        algo_keys
            .iter()
            .flat_map(|k| (0..per_federation).map(move |i| crate::rng::fold_key(&Self::noise_key(k, i))))
            .collect()
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

    /// Inserts agent `i`'s next leaf k and adds the agent's release (exact
    /// prefix sum plus the noise of its live nodes) to `out`. The noise sum
    /// loses the nodes k closes and gains node k's noise, each filled by
    /// `draw(node_noise, node_key)`; at a power of two it restarts as node
    /// k's noise.
    pub fn contribute(
        &mut self,
        i: usize,
        leaf: &[f64],
        out: &mut [f64],
        mut draw: impl FnMut(&mut [f64], u64),
    ) -> Result<(), TreeFull> {
        let tree = &mut self.trees[i];
        let k = tree.insert(leaf)?;
        let key = self.keys[i];
        if k.is_power_of_two() {
            draw(&mut tree.noise, Self::node_key(key, k));
        } else {
            for node in closed_nodes(k) {
                draw(&mut self.z, Self::node_key(key, node));
                for (n, z) in tree.noise.iter_mut().zip(&self.z) {
                    *n -= z;
                }
            }
            draw(&mut self.z, Self::node_key(key, k));
            for (n, z) in tree.noise.iter_mut().zip(&self.z) {
                *n += z;
            }
        }
        tree.add_release(out);
        Ok(())
    }
}

/// Fills one tree node's noise for a flat (d x d Gram, d bias) leaf, entry
/// by entry a pure function of the node's key (so a GPU thread per entry
/// computes the same bits): Z_e = sigma normal_entry(key, e) for every
/// entry ([`crate::rng::keyed`], generated in vectorized blocks), then the
/// Gram part is symmetrized, (Z + Z^T)/2 (Zhou & Chowdhury's node noise, as
/// in the authors' code).
pub fn symmetric_gaussian(z: &mut [f64], d: usize, sigma: f64, key: u64) {
    debug_assert_eq!(z.len(), d * d + d);
    crate::rng::keyed::fill_normals_at(key, sigma, z);
    for i in 0..d {
        for j in i + 1..d {
            let s = 0.5 * (z[i * d + j] + z[j * d + i]);
            z[i * d + j] = s;
            z[j * d + i] = s;
        }
    }
}

/// One PRIVATIZER node's noise in the flat (Gram, bias) layout of Dubey &
/// Pentland's FedUCB, entry by entry a pure function of the node's key.
/// The paper draws N_hat, (d+1)x(d+1) with i.i.d. N(0, sigma^2) entries, and
/// adds N = (N_hat + N_hat^T)/sqrt(2) to [x; y][x; y]^T: off-diagonal entries
/// N(0, sigma^2), diagonal entries N(0, 2 sigma^2), the (i, d+1) column
/// entries N(0, sigma^2), all independent but for the symmetry. This draws
/// exactly that distribution from the d^2 + d entries Z_e = sigma
/// normal_entry(key, e) of the leaf's layout ([`crate::rng::keyed`],
/// generated in vectorized blocks): Gram (i, j) and (j, i) get (Z_ij +
/// Z_ji)/sqrt(2) (the diagonal (Z_ii + Z_ii)/sqrt(2) = sqrt(2) Z_ii), the
/// bias entries Z itself (the one normal (N_hat_{i,d+1} +
/// N_hat_{d+1,i})/sqrt(2) is a single N(0, sigma^2) draw). The y^2 corner
/// is unused.
pub fn dubey_noise(z: &mut [f64], d: usize, sigma: f64, key: u64) {
    debug_assert_eq!(z.len(), d * d + d);
    let inv_sqrt2 = std::f64::consts::FRAC_1_SQRT_2;
    crate::rng::keyed::fill_normals_at(key, sigma, z);
    for i in 0..d {
        for j in i..d {
            let v = (z[i * d + j] + z[j * d + i]) * inv_sqrt2;
            z[i * d + j] = v;
            z[j * d + i] = v;
        }
    }
}

/// Which symmetric Gaussian a tree node's noise is: the two papers
/// symmetrize the Gram part differently.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum NodeNoise {
    /// Zhou & Chowdhury: (Z + Z^T)/2 ([`symmetric_gaussian`]).
    Half,
    /// Dubey & Pentland: (Z + Z^T)/sqrt(2) ([`dubey_noise`]).
    Dubey,
}

impl NodeNoise {
    /// Fills `z` (d x d Gram, then d bias entries) with the node noise of
    /// key `key` at standard deviation `sigma`.
    pub fn fill(self, z: &mut [f64], d: usize, sigma: f64, key: u64) {
        match self {
            NodeNoise::Half => symmetric_gaussian(z, d, sigma, key),
            NodeNoise::Dubey => dubey_noise(z, d, sigma, key),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    /// The textbook tree (stored p-sums and node noise drawn when the node is
    /// created), as the reference the key-regenerated form must equal.
    struct Textbook {
        psum: Vec<Vec<f64>>,
        noise: Vec<Vec<f64>>,
        leaves: u64,
    }

    impl Textbook {
        fn new(width: usize, levels: usize) -> Self {
            Self {
                psum: vec![vec![0.0; width]; levels],
                noise: vec![vec![0.0; width]; levels],
                leaves: 0,
            }
        }

        fn insert(&mut self, leaf: &[f64], key: u64, draw: &impl Fn(&mut [f64], u64)) {
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
            draw(&mut self.noise[level], AgentTrees::node_key(key, k));
            self.leaves = k;
        }

        /// The release, and the largest magnitude of its terms (the scale of
        /// its rounding error).
        fn release(&self, out: &mut [f64]) -> f64 {
            out.fill(0.0);
            let mut scale = 0.0f64;
            for j in 0..self.psum.len() {
                if (self.leaves >> j) & 1 == 1 {
                    for (o, (p, z)) in out.iter_mut().zip(self.psum[j].iter().zip(&self.noise[j])) {
                        *o += p + z;
                        scale = scale.max(p.abs()).max(z.abs());
                    }
                }
            }
            scale
        }
    }

    /// 2^20 leaves of width d^2 + d at d = 10 (symmetric Gaussian node
    /// noise, leaves of magnitude 1): after every leaf the release equals
    /// the textbook tree's to 1e-9 relative to the largest term (the noise
    /// sum is updated incrementally, so this bounds its drift).
    #[test]
    fn release_equals_the_textbook_tree_over_2_pow_20_leaves() {
        let (d, levels, leaves) = (10usize, 21usize, 1u64 << 20);
        let width = d * d + d;
        let draw = |z: &mut [f64], nk: u64| symmetric_gaussian(z, d, 1.0, nk);
        let mut trees = AgentTrees::new(1, width, levels, &[5, 6]);
        let key = trees.keys[0];
        let mut book = Textbook::new(width, levels);
        let mut s = Stream::new(&[11]);
        let (mut leaf, mut rel, mut want) = (vec![0.0; width], vec![0.0; width], vec![0.0; width]);
        let mut worst = 0.0f64;
        for k in 1..=leaves {
            for v in &mut leaf {
                *v = s.uniform() - 0.5;
            }
            book.insert(&leaf, key, &draw);
            rel.fill(0.0);
            trees.contribute(0, &leaf, &mut rel, draw).unwrap();
            let scale = book.release(&mut want).max(1.0);
            for (a, b) in rel.iter().zip(&want) {
                worst = worst.max((a - b).abs() / scale);
            }
            assert!(worst < 1e-9, "k = {k}: relative difference {worst:e}");
        }
        assert!(worst > 0.0, "the two forms add in different orders");
        let mut full = AgentTrees::new(1, 3, 8, &[1]);
        for _ in 0..255 {
            full.contribute(0, &[0.0; 3], &mut [0.0; 3], |_, _| {}).unwrap();
        }
        let err = full.contribute(0, &[0.0; 3], &mut [0.0; 3], |_, _| {});
        assert_eq!(
            err,
            Err(TreeFull { levels: 8, leaf: 256 }),
            "leaf 256 must not fit 8 levels"
        );
    }

    /// Every node's noise enters each release it belongs to exactly once:
    /// with node noise (1, node, node^2) (exact in f64 here), the noise part
    /// of the release after leaf k is (popcount(k), sum, sum of squares)
    /// over the live nodes of k; and nodes are regenerated i_k + 1 times per
    /// leaf, two on average.
    #[test]
    fn every_live_node_enters_each_release_exactly_once() {
        let mut trees = AgentTrees::with_keys(vec![0], 3, 18);
        let drawn = std::cell::Cell::new(0u64);
        let leaves = 1u64 << 16;
        for k in 1..=leaves {
            let mut rel = [0.0; 3];
            trees
                .contribute(0, &[0.0; 3], &mut rel, |z, nk| {
                    drawn.set(drawn.get() + 1);
                    // Which node: the one among k and those it closes with
                    // this key.
                    let node = node_of(nk, k);
                    z.copy_from_slice(&[1.0, node as f64, (node * node) as f64]);
                })
                .unwrap();
            let live: Vec<u64> = live_nodes(k).collect();
            let want = [
                live.len() as f64,
                live.iter().sum::<u64>() as f64,
                live.iter().map(|n| n * n).sum::<u64>() as f64,
            ];
            assert_eq!(rel, want, "k = {k}");
        }
        assert!(drawn.get() < 2 * leaves, "{} draws for {leaves} leaves", drawn.get());
    }

    /// The node (among those leaf k can draw: k and the nodes it closes)
    /// whose key under agent key 0 is `nk`.
    fn node_of(nk: u64, k: u64) -> u64 {
        std::iter::once(k)
            .chain(closed_nodes(k))
            .find(|&n| AgentTrees::node_key(0, n) == nk)
            .expect("a drawn node is k or one it closes")
    }

    #[test]
    fn a_node_keeps_its_noise_while_live_and_nodes_differ() {
        // Leaf 4 closes node 4 (level 2); it stays live through leaf 7, with
        // the same key each time, and distinct from the other nodes' keys.
        let used: Vec<Vec<u64>> = (4..=7).map(|k| live_nodes(k).collect()).collect();
        assert_eq!(used, vec![vec![4], vec![5, 4], vec![6, 4], vec![7, 6, 4]]);
        assert_eq!(closed_nodes(8).collect::<Vec<_>>(), vec![7, 6, 4]);
        assert_eq!(closed_nodes(6).collect::<Vec<_>>(), vec![5]);
        assert_eq!(closed_nodes(5).count(), 0);
        let key = crate::rng::fold_key(&[1, 2]);
        assert_eq!(AgentTrees::node_key(key, 4), crate::rng::fold_key(&[1, 2, 4]));
        assert_ne!(AgentTrees::node_key(key, 4), AgentTrees::node_key(key, 6));
    }

    #[test]
    fn state_is_two_vectors_per_agent() {
        let t = AgentTrees::new(100, 16_512, 25, &[1]);
        let floats: usize = t.trees.iter().map(|x| x.sum.len() + x.noise.len()).sum::<usize>() + t.z.len();
        assert_eq!(floats, 201 * 16_512);
    }
}
