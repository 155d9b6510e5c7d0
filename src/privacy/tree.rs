//! The tree-based mechanism (binary counter; Dwork et al. 2010, Chan et al.
//! 2011) used by both linear-family papers.
//!
//! Leaves arrive one at a time (an agent's batch or sync contribution, as a
//! flat vector: the d x d Gram part followed by the d bias entries). Leaf k
//! (1-based) closes the p-sum at level i_k = (index of the lowest set bit of
//! k): alpha_{i_k} = sum_{j < i_k} alpha_j + leaf, covering 2^{i_k} leaves;
//! the lower levels are emptied. The node's noise is drawn once, when the node
//! is created. The release after leaf k is the sum over the set bits j of k of
//! (alpha_j + noise_j): the exact prefix sum plus the noise of at most
//! floor(log2 k) + 1 nodes, each leaf touching at most one node per level.
//!
//! Memory: 2 x levels x width values; nothing grows with the horizon.

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

/// One agent's binary-counter tree.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Tree {
    width: usize,
    levels: usize,
    leaves: u64,
    psum: Vec<f64>,
    noise: Vec<f64>,
}

impl Tree {
    /// A tree for vectors of `width` entries and up to 2^levels - 1 leaves.
    pub fn new(width: usize, levels: usize) -> Self {
        Self {
            width,
            levels,
            leaves: 0,
            psum: vec![0.0; width * levels],
            noise: vec![0.0; width * levels],
        }
    }

    /// Leaves inserted so far.
    pub fn leaves(&self) -> u64 {
        self.leaves
    }

    /// Inserts the next leaf. `draw_noise` fills the new node's noise.
    pub fn insert(&mut self, leaf: &[f64], mut draw_noise: impl FnMut(&mut [f64])) -> Result<(), TreeFull> {
        let k = self.leaves + 1;
        let level = k.trailing_zeros() as usize;
        if level >= self.levels {
            return Err(TreeFull {
                levels: self.levels,
                leaf: k,
            });
        }
        let w = self.width;
        let (below, rest) = self.psum.split_at_mut(level * w);
        let node = &mut rest[..w];
        node.copy_from_slice(leaf);
        for j in 0..level {
            for (n, v) in node.iter_mut().zip(&below[j * w..(j + 1) * w]) {
                *n += v;
            }
        }
        below.fill(0.0);
        self.noise[..level * w].fill(0.0);
        draw_noise(&mut self.noise[level * w..(level + 1) * w]);
        self.leaves = k;
        Ok(())
    }

    /// Levels whose nodes make up the current release (the set bits of the
    /// leaf count).
    pub fn nodes_used(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.levels).filter(move |j| (self.leaves >> j) & 1 == 1)
    }

    /// Adds the current noisy prefix sum to `out`.
    pub fn add_release(&self, out: &mut [f64]) {
        let w = self.width;
        for j in self.nodes_used() {
            let p = &self.psum[j * w..(j + 1) * w];
            let z = &self.noise[j * w..(j + 1) * w];
            for ((o, a), b) in out.iter_mut().zip(p).zip(z) {
                *o += a + b;
            }
        }
    }

    /// Noise of the node at `level` (zero if the node is not live).
    pub fn node_noise(&self, level: usize) -> &[f64] {
        &self.noise[level * self.width..(level + 1) * self.width]
    }
}

/// The trees of a federation's M agents with their noise streams (one
/// stream per agent, keyed by the algorithm's key, agent and purpose).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct AgentTrees {
    trees: Vec<Tree>,
    noise: Vec<crate::rng::Stream>,
}

impl AgentTrees {
    /// The key of agent `i`'s noise stream.
    pub fn noise_key(algo_key: &[u64], i: usize) -> Vec<u64> {
        let mut k = algo_key.to_vec();
        k.extend_from_slice(&[i as u64, crate::rng::Purpose::PrivacyNoise as u64]);
        k
    }

    /// Trees for `m` agents.
    pub fn new(m: usize, width: usize, levels: usize, algo_key: &[u64]) -> Self {
        let noise = (0..m)
            .map(|i| crate::rng::Stream::new(&Self::noise_key(algo_key, i)))
            .collect();
        Self {
            trees: (0..m).map(|_| Tree::new(width, levels)).collect(),
            noise,
        }
    }

    /// Inserts agent `i`'s next leaf, drawing the new node's noise with
    /// `draw(node, agent_stream)`, and adds the agent's release to `out`.
    pub fn contribute(
        &mut self,
        i: usize,
        leaf: &[f64],
        out: &mut [f64],
        mut draw: impl FnMut(&mut [f64], &mut crate::rng::Stream),
    ) -> Result<(), TreeFull> {
        let rng = &mut self.noise[i];
        self.trees[i].insert(leaf, |z| draw(z, rng))?;
        self.trees[i].add_release(out);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    #[test]
    fn release_is_true_sum_plus_noise_of_used_nodes() {
        let width = 3;
        let levels = 8;
        let mut tree = Tree::new(width, levels);
        let mut s = Stream::new(&[11]);
        let mut truth = vec![0.0; width];
        for k in 1..=255u64 {
            let leaf: Vec<f64> = (0..width).map(|_| s.uniform()).collect();
            for (t, l) in truth.iter_mut().zip(&leaf) {
                *t += l;
            }
            let mut ns = Stream::new(&[12, k]);
            tree.insert(&leaf, |z| z.iter_mut().for_each(|v| *v = 1e3 * ns.normal()))
                .unwrap();
            let used: Vec<usize> = tree.nodes_used().collect();
            assert!(used.len() <= (63 - k.leading_zeros()) as usize + 1);
            assert_eq!(used.len(), k.count_ones() as usize);
            let mut rel = vec![0.0; width];
            tree.add_release(&mut rel);
            let mut noise = vec![0.0; width];
            for &j in &used {
                for (n, z) in noise.iter_mut().zip(tree.node_noise(j)) {
                    *n += z;
                }
            }
            for c in 0..width {
                let diff = rel[c] - truth[c];
                assert!((diff - noise[c]).abs() < 1e-9, "k={k} c={c}");
            }
        }
        assert!(
            tree.insert(&[0.0; 3], |_| {}).is_err(),
            "leaf 256 must not fit 8 levels"
        );
    }

    #[test]
    fn each_node_noise_drawn_once() {
        let mut tree = Tree::new(1, 4);
        let mut draws = 0;
        for _ in 0..15 {
            tree.insert(&[1.0], |z| {
                draws += 1;
                z[0] = 0.5;
            })
            .unwrap();
        }
        // One fresh node per leaf; a release reuses the stored noise.
        assert_eq!(draws, 15);
        let mut r = [0.0];
        tree.add_release(&mut r);
        assert!((r[0] - (15.0 + 4.0 * 0.5)).abs() < 1e-12);
    }
}
