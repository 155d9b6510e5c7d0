//! Communication graphs: `complete`, `ring`, `line`,
//! `star`, `grid` (rows x cols), `erdos_renyi` (p; redrawn until connected,
//! seeded), `random_regular` (degree; configuration model, redrawn until
//! simple and connected) and `edges` (an edge-list file: one `u v` pair of
//! 0-based agent indices per line, `#` comments). A disconnected graph is an
//! error naming its components. Hop distances by breadth-first search.

use crate::rng::Stream;
use std::collections::VecDeque;
use thiserror::Error;

/// An undirected simple graph on agents 0..n with hop distances.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Graph {
    n: usize,
    adj: Vec<Vec<usize>>,
    dist: Vec<u32>,
}

/// Graph construction failures.
#[derive(Clone, Debug, Error, PartialEq)]
pub enum GraphError {
    /// The graph is not connected.
    #[error("graph is disconnected: {} components: {}", components.len(), describe(components))]
    Disconnected {
        /// The components (agent indices).
        components: Vec<Vec<usize>>,
    },
    /// Parameters that cannot make the graph.
    #[error("{0}")]
    Invalid(String),
}

/// Why an edge-list file cannot be used.
#[derive(Debug, Error)]
pub enum EdgeFileError {
    /// It cannot be opened or read.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// It holds more than [`MAX_EDGE_FILE_BYTES`].
    #[error("larger than {MAX_EDGE_FILE_BYTES} bytes; is it an edge list?")]
    TooLarge,
    /// It is not UTF-8 text.
    #[error("stream did not contain valid UTF-8")]
    NotText,
    /// A line that is not a pair of agent indices.
    #[error("line {line}: expected two agent indices `u v`, got `{text}`")]
    Line {
        /// 1-based line number.
        line: usize,
        /// The line, comments removed.
        text: String,
    },
}

fn describe(components: &[Vec<usize>]) -> String {
    components
        .iter()
        .map(|c| {
            let shown: Vec<String> = c.iter().take(8).map(usize::to_string).collect();
            format!("{{{}{}}}", shown.join(", "), if c.len() > 8 { ", ..." } else { "" })
        })
        .collect::<Vec<_>>()
        .join(" ")
}

crate::named_enum! {
    /// The job-file names of the graphs ([`GraphSpec`], whose parameters
    /// come with them).
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum GraphKind {
        /// [`GraphSpec::Complete`].
        Complete = "complete",
        /// [`GraphSpec::Ring`].
        Ring = "ring",
        /// [`GraphSpec::Line`].
        Line = "line",
        /// [`GraphSpec::Star`].
        Star = "star",
        /// [`GraphSpec::Grid`].
        Grid = "grid",
        /// [`GraphSpec::ErdosRenyi`].
        ErdosRenyi = "erdos_renyi",
        /// [`GraphSpec::RandomRegular`].
        RandomRegular = "random_regular",
        /// [`GraphSpec::Edges`].
        Edges = "edges",
    }
}

/// Which graph to build.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum GraphSpec {
    /// Every pair connected.
    Complete,
    /// A cycle.
    Ring,
    /// A path.
    Line,
    /// Agent 0 connected to all others.
    Star,
    /// A rows x (n / rows) grid.
    Grid {
        /// Rows (must divide n).
        rows: usize,
    },
    /// G(n, p), redrawn until connected.
    ErdosRenyi {
        /// Edge probability.
        p: f64,
    },
    /// A random `degree`-regular graph.
    RandomRegular {
        /// Degree.
        degree: usize,
    },
    /// Edges given explicitly.
    Edges(Vec<(usize, usize)>),
}

impl GraphSpec {
    /// The most agents within `hops` hops of one agent (itself included),
    /// over every graph this spec can build on `n` agents: for a fixed
    /// graph its largest ball, built once; for `random_regular` the Moore
    /// bound 1 + k sum_{h < hops} (k - 1)^h (no k-regular graph has a larger
    /// ball); for `erdos_renyi`, any graph: n. `None` when the graph cannot
    /// be built.
    pub fn max_reach(&self, n: usize, hops: usize) -> Option<usize> {
        match self {
            GraphSpec::ErdosRenyi { .. } => Some(n),
            GraphSpec::RandomRegular { degree } => {
                let (mut ball, mut shell) = (1usize, *degree);
                for _ in 0..hops {
                    ball = ball.saturating_add(shell);
                    shell = shell.saturating_mul(degree.saturating_sub(1));
                    if ball >= n {
                        break;
                    }
                }
                Some(ball.min(n))
            }
            _ => {
                let g = Graph::build(self, n, &mut Stream::new(&[0])).ok()?;
                (0..n)
                    .map(|i| (0..n).filter(|&j| g.dist(i, j) as usize <= hops).count())
                    .max()
            }
        }
    }

    /// The mean degree of the graph on `n` agents (its expectation for
    /// `erdos_renyi`, which redraws disconnected graphs: slightly above);
    /// the time model's neighbours per agent ([`crate::graph`]'s users).
    pub fn mean_degree(&self, n: usize) -> f64 {
        let n_f = n.max(1) as f64;
        let edges = match self {
            GraphSpec::Complete => n * n.saturating_sub(1) / 2,
            GraphSpec::Ring if n >= 3 => n,
            GraphSpec::Ring | GraphSpec::Line | GraphSpec::Star => n.saturating_sub(1),
            GraphSpec::Grid { rows } => {
                let (r, c) = (*rows.max(&1), n / rows.max(&1));
                r * c.saturating_sub(1) + c * r.saturating_sub(1)
            }
            GraphSpec::ErdosRenyi { p } => return p * (n_f - 1.0),
            GraphSpec::RandomRegular { degree } => return *degree as f64,
            GraphSpec::Edges(e) => e.len(),
        };
        2.0 * edges as f64 / n_f
    }
}

impl Graph {
    /// Builds a graph; random kinds draw from `rng`.
    pub fn build(spec: &GraphSpec, n: usize, rng: &mut Stream) -> Result<Graph, GraphError> {
        if n == 0 {
            return Err(GraphError::Invalid("a graph needs at least one agent".into()));
        }
        let edges: Vec<(usize, usize)> = match spec {
            GraphSpec::Complete => (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).collect(),
            GraphSpec::Ring => {
                if n < 3 {
                    (0..n.saturating_sub(1)).map(|i| (i, i + 1)).collect()
                } else {
                    (0..n).map(|i| (i, (i + 1) % n)).collect()
                }
            }
            GraphSpec::Line => (0..n.saturating_sub(1)).map(|i| (i, i + 1)).collect(),
            GraphSpec::Star => (1..n).map(|i| (0, i)).collect(),
            GraphSpec::Grid { rows } => {
                let rows = *rows;
                if rows == 0 || !n.is_multiple_of(rows) {
                    return Err(GraphError::Invalid(format!(
                        "grid rows = {rows} must divide the number of agents {n}"
                    )));
                }
                let cols = n / rows;
                let mut e = Vec::new();
                for r in 0..rows {
                    for c in 0..cols {
                        let v = r * cols + c;
                        if c + 1 < cols {
                            e.push((v, v + 1));
                        }
                        if r + 1 < rows {
                            e.push((v, v + cols));
                        }
                    }
                }
                e
            }
            GraphSpec::ErdosRenyi { p } => {
                for _ in 0..10_000 {
                    let e: Vec<(usize, usize)> = (0..n)
                        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
                        .filter(|_| rng.uniform() < *p)
                        .collect();
                    let g = Self::from_edges(n, &e)?;
                    if g.components().len() == 1 {
                        return Ok(g);
                    }
                }
                return Err(GraphError::Invalid(format!(
                    "erdos_renyi with p = {p} on {n} agents was disconnected in 10000 draws; raise p"
                )));
            }
            GraphSpec::RandomRegular { degree } => {
                let k = *degree;
                if k >= n || !(n * k).is_multiple_of(2) {
                    return Err(GraphError::Invalid(format!(
                        "random_regular needs degree < agents and degree x agents even (degree {k}, agents {n})"
                    )));
                }
                for _ in 0..10_000 {
                    // Configuration model: pair up n k stubs uniformly.
                    let mut stubs: Vec<usize> = (0..n).flat_map(|v| std::iter::repeat_n(v, k)).collect();
                    for i in (1..stubs.len()).rev() {
                        let j = rng.below(i as u64 + 1) as usize;
                        stubs.swap(i, j);
                    }
                    let e: Vec<(usize, usize)> = stubs
                        .chunks_exact(2)
                        .map(|c| (c[0].min(c[1]), c[0].max(c[1])))
                        .collect();
                    let mut sorted = e.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    if sorted.len() != e.len() || e.iter().any(|(a, b)| a == b) {
                        continue; // multi-edge or loop: redraw
                    }
                    let g = Self::from_edges(n, &e)?;
                    if g.components().len() == 1 {
                        return Ok(g);
                    }
                }
                return Err(GraphError::Invalid(format!(
                    "no connected simple {k}-regular graph on {n} agents in 10000 draws"
                )));
            }
            GraphSpec::Edges(e) => e.clone(),
        };
        let g = Self::from_edges(n, &edges)?;
        let comps = g.components();
        if comps.len() > 1 {
            return Err(GraphError::Disconnected { components: comps });
        }
        Ok(g)
    }

    fn from_edges(n: usize, edges: &[(usize, usize)]) -> Result<Graph, GraphError> {
        let mut adj = vec![Vec::new(); n];
        for &(a, b) in edges {
            if a >= n || b >= n {
                return Err(GraphError::Invalid(format!("edge ({a}, {b}) names an agent >= {n}")));
            }
            if a == b {
                return Err(GraphError::Invalid(format!(
                    "edge ({a}, {b}) is a self-loop; an agent is always its own neighbour, list edges between distinct agents"
                )));
            }
            if !adj[a].contains(&b) {
                adj[a].push(b);
                adj[b].push(a);
            }
        }
        for a in &mut adj {
            a.sort_unstable();
        }
        let mut dist = vec![u32::MAX; n * n];
        for s in 0..n {
            let mut q = VecDeque::from([s]);
            dist[s * n + s] = 0;
            while let Some(v) = q.pop_front() {
                for &w in &adj[v] {
                    if dist[s * n + w] == u32::MAX {
                        dist[s * n + w] = dist[s * n + v] + 1;
                        q.push_back(w);
                    }
                }
            }
        }
        Ok(Graph { n, adj, dist })
    }

    /// Connected components, each sorted, ordered by smallest member.
    pub fn components(&self) -> Vec<Vec<usize>> {
        let mut seen = vec![false; self.n];
        let mut out = Vec::new();
        for s in 0..self.n {
            if seen[s] {
                continue;
            }
            let mut c: Vec<usize> = (0..self.n).filter(|&v| self.dist[s * self.n + v] != u32::MAX).collect();
            for &v in &c {
                seen[v] = true;
            }
            c.sort_unstable();
            out.push(c);
        }
        out
    }

    /// Number of agents.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the graph has no agents (never, for a built graph).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Hop distance (u32::MAX when unreachable).
    pub fn dist(&self, a: usize, b: usize) -> u32 {
        self.dist[a * self.n + b]
    }

    /// Neighbours of `v`.
    pub fn neighbors(&self, v: usize) -> &[usize] {
        &self.adj[v]
    }

    /// Largest hop distance.
    pub fn diameter(&self) -> u32 {
        self.dist.iter().copied().filter(|&d| d != u32::MAX).max().unwrap_or(0)
    }

    /// Number of edges.
    pub fn edge_count(&self) -> usize {
        self.adj.iter().map(Vec::len).sum::<usize>() / 2
    }

    /// The edges (i, j) with i < j, in order of i, then of j's position in
    /// i's neighbour list: the list a uniform random edge is drawn from.
    pub fn edges(&self) -> Vec<(usize, usize)> {
        (0..self.n)
            .flat_map(|i| self.adj[i].iter().filter(move |&&j| j > i).map(move |&j| (i, j)))
            .collect()
    }

    /// The second largest eigenvalue lambda_2 of the expected gossip matrix
    /// of one uniformly random edge per round (Zhu et al.):
    /// W_bar = I - (1 / (2|E|)) sum_{(i,j) in E} (e_i - e_j)(e_i - e_j)^T,
    /// i.e. I - L / (2|E|) with L the graph Laplacian. W_bar is symmetric
    /// and doubly stochastic, its largest eigenvalue is 1 (eigenvector 1),
    /// and lambda_2 < 1 exactly when the graph is connected. 0 for a single
    /// agent or no edge.
    pub fn gossip_lambda2(&self) -> f64 {
        let (n, e) = (self.n, self.edge_count());
        if n < 2 || e == 0 {
            return 0.0;
        }
        let c = 1.0 / (2.0 * e as f64);
        let w = faer::Mat::<f64>::from_fn(n, n, |i, j| {
            let l = if i == j {
                self.adj[i].len() as f64
            } else if self.adj[i].contains(&j) {
                -1.0
            } else {
                0.0
            };
            f64::from(u8::from(i == j)) - c * l
        });
        // Ascending order; a symmetric matrix of finite entries always
        // converges, so the fallback is unreachable.
        w.self_adjoint_eigenvalues(faer::Side::Lower)
            .map(|ev| ev[n - 2])
            .unwrap_or(f64::NAN)
    }
}

/// Most agents a graph may have (a graph holds all-pairs hop distances, m^2
/// entries built with m^3 work, per federation).
pub const MAX_GRAPH_AGENTS: usize = 1000;

/// Largest edge-list file read.
pub const MAX_EDGE_FILE_BYTES: usize = 64 << 20;

/// Reads and parses an edge-list file ([`parse_edges`]); at most
/// [`MAX_EDGE_FILE_BYTES`] are read (a device or a huge file named by
/// mistake is refused, never read whole).
pub fn read_edge_file(path: &std::path::Path) -> Result<Vec<(usize, usize)>, EdgeFileError> {
    let bytes = crate::input::read_capped(path, MAX_EDGE_FILE_BYTES + 1)?;
    if bytes.len() > MAX_EDGE_FILE_BYTES {
        return Err(EdgeFileError::TooLarge);
    }
    let text = String::from_utf8(bytes).map_err(|_| EdgeFileError::NotText)?;
    parse_edges(&text)
}

/// Every agent's senders within gamma hops of a [`Graph`] (itself included,
/// at distance 0), in index order: decentralized FedUCB's message reach.
/// `(agent, distance)` pairs, agent i's at `list[start[i]..start[i + 1]]`.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Reach {
    /// Offsets into `list` (m + 1).
    pub start: Vec<usize>,
    /// (sender, hops).
    pub list: Vec<(u32, u32)>,
}

impl Reach {
    /// The senders of every agent of `graph` within `gamma` hops.
    pub fn new(graph: &Graph, gamma: usize) -> Self {
        let m = graph.len();
        let mut start = Vec::with_capacity(m + 1);
        let mut list = Vec::new();
        start.push(0);
        for i in 0..m {
            for j in 0..m {
                let dist = graph.dist(i, j);
                if dist as usize <= gamma {
                    list.push((j as u32, dist));
                }
            }
            start.push(list.len());
        }
        Self { start, list }
    }

    /// Agent i's senders.
    pub fn of(&self, i: usize) -> &[(u32, u32)] {
        &self.list[self.start[i]..self.start[i + 1]]
    }

    /// Agents a message of agent i reaches besides itself.
    pub fn receivers(&self, i: usize) -> u64 {
        (self.start[i + 1] - self.start[i]).saturating_sub(1) as u64
    }
}

/// Parses an edge-list file's text.
pub fn parse_edges(text: &str) -> Result<Vec<(usize, usize)>, EdgeFileError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let parts: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|s| !s.is_empty())
            .collect();
        let pair = (parts.len() == 2)
            .then(|| Some((parts[0].parse::<usize>().ok()?, parts[1].parse::<usize>().ok()?)))
            .flatten();
        match pair {
            Some(p) => out.push(p),
            None => {
                return Err(EdgeFileError::Line {
                    line: n + 1,
                    text: line.to_owned(),
                });
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(spec: GraphSpec, n: usize) -> Graph {
        Graph::build(&spec, n, &mut Stream::new(&[1])).unwrap()
    }

    #[test]
    fn max_reach_bounds_every_ball() {
        // A ring of 12 within 3 hops: 7 agents (the n_i).
        assert_eq!(GraphSpec::Ring.max_reach(12, 3), Some(7));
        assert_eq!(GraphSpec::Star.max_reach(12, 1), Some(12));
        assert_eq!(GraphSpec::Line.max_reach(12, 2), Some(5));
        assert_eq!(GraphSpec::Complete.max_reach(5, 1), Some(5));
        assert_eq!(GraphSpec::ErdosRenyi { p: 0.3 }.max_reach(12, 1), Some(12));
        // Moore bound of a 3-regular graph: 1 + 3 + 6 = 10 within 2 hops.
        let rr = GraphSpec::RandomRegular { degree: 3 };
        assert_eq!(rr.max_reach(40, 2), Some(10));
        assert_eq!(rr.max_reach(8, 5), Some(8));
        for seed in 0..20u64 {
            let g = Graph::build(&rr, 40, &mut Stream::new(&[seed])).unwrap();
            let ball = (0..40).map(|i| (0..40).filter(|&j| g.dist(i, j) <= 2).count()).max();
            assert!(ball <= Some(10), "seed {seed}: {ball:?}");
        }
    }

    #[test]
    fn shapes_and_diameters() {
        assert_eq!(build(GraphSpec::Complete, 6).diameter(), 1);
        assert_eq!(
            build(GraphSpec::Ring, 5).edges(),
            vec![(0, 1), (0, 4), (1, 2), (2, 3), (3, 4)]
        );
        assert_eq!(build(GraphSpec::Complete, 6).edge_count(), 15);
        assert_eq!(build(GraphSpec::Ring, 8).diameter(), 4);
        assert_eq!(build(GraphSpec::Line, 8).diameter(), 7);
        assert_eq!(build(GraphSpec::Star, 8).diameter(), 2);
        let g = build(GraphSpec::Grid { rows: 3 }, 12);
        assert_eq!(g.diameter(), 2 + 3);
        assert_eq!(g.edge_count(), 3 * 3 + 2 * 4);
        let r = build(GraphSpec::RandomRegular { degree: 3 }, 10);
        assert!((0..10).all(|v| r.neighbors(v).len() == 3));
        let e = build(GraphSpec::ErdosRenyi { p: 0.3 }, 12);
        assert_eq!(e.components().len(), 1);
    }

    #[test]
    fn disconnected_graphs_name_their_components() {
        let err = Graph::build(&GraphSpec::Edges(vec![(0, 1), (2, 3)]), 5, &mut Stream::new(&[1])).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("3 components"), "{msg}");
        assert!(
            msg.contains("{0, 1}") && msg.contains("{2, 3}") && msg.contains("{4}"),
            "{msg}"
        );
    }

    #[test]
    fn edge_files_parse_with_comments() {
        assert_eq!(
            parse_edges("# ring\n0 1\n1,2\n\n2 0 # back\n").unwrap(),
            vec![(0, 1), (1, 2), (2, 0)]
        );
        assert!(parse_edges("0 1 2\n").is_err());
    }

    #[test]
    fn gossip_lambda2_closed_forms() {
        // Complete graph K_n: L has eigenvalues 0 and n (n - 1 times), |E| =
        // n(n-1)/2, so lambda_2 = 1 - n / (n (n - 1)) = 1 - 1/(n - 1).
        for n in [2usize, 3, 6, 10] {
            let l2 = build(GraphSpec::Complete, n).gossip_lambda2();
            assert!((l2 - (1.0 - 1.0 / (n as f64 - 1.0))).abs() < 1e-12, "K_{n}: {l2}");
        }
        // Ring C_n: Laplacian eigenvalues 2 - 2 cos(2 pi k / n); the smallest
        // non-zero is 2 - 2 cos(2 pi / n), |E| = n.
        for n in [5usize, 8, 12] {
            let want = 1.0 - (2.0 - 2.0 * (2.0 * std::f64::consts::PI / n as f64).cos()) / (2.0 * n as f64);
            let l2 = build(GraphSpec::Ring, n).gossip_lambda2();
            assert!((l2 - want).abs() < 1e-12, "C_{n}: {l2} vs {want}");
        }
        // Star S_n: Laplacian eigenvalues 0, 1 (n - 2 times), n; |E| = n - 1.
        let l2 = build(GraphSpec::Star, 7).gossip_lambda2();
        assert!((l2 - (1.0 - 1.0 / 12.0)).abs() < 1e-12, "{l2}");
        // Sparser graphs mix more slowly.
        assert!(build(GraphSpec::Line, 8).gossip_lambda2() > build(GraphSpec::Ring, 8).gossip_lambda2());
    }
}
