//! The nesting depth of a job file's YAML, measured before it is parsed:
//! serde_yaml refuses deep nesting itself ("recursion limit exceeded"), but
//! only after time that grows with the square of the depth (57 s for a
//! 200 KB file nested 100,000 levels). A linear scan refuses it first.
//!
//! The depth counted is flow collections (`[`, `{`, outside quotes and
//! comments) plus block structure: the indentation levels open at a line's
//! start and the block-sequence dashes (`- - x`) that open on it. It is an
//! upper bound of the parser's depth for every construct a job uses, so no
//! valid job is refused at [`MAX_DEPTH`] (a job is at most three levels
//! deep: `grid: {epsilon: {logspace: [..]}}`).

/// The deepest nesting a job file may have.
pub const MAX_DEPTH: usize = 32;

/// The first line (1-based) where the nesting exceeds [`MAX_DEPTH`], with
/// the depth reached there; None when it never does.
pub fn too_deep(text: &str) -> Option<(usize, usize)> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    for (n, line) in text.lines().enumerate() {
        let mut block = 0;
        if flow == 0 {
            let body = line.trim_start_matches(' ');
            if body.is_empty() || body.starts_with('#') {
                continue;
            }
            let indent = line.len() - body.len();
            while indents.last().is_some_and(|&i| i >= indent) {
                indents.pop();
            }
            indents.push(indent);
            // Block sequences opened on this line: "- - - x".
            let mut rest = body;
            while let Some(r) = rest.strip_prefix("- ").or_else(|| (rest == "-").then_some("")) {
                block += 1;
                rest = r.trim_start_matches(' ');
            }
        }
        let depth = |flow: usize| indents.len() + block + flow;
        if depth(flow) > MAX_DEPTH {
            return Some((n + 1, depth(flow)));
        }
        let (mut single, mut double, mut escaped) = (false, false, false);
        let mut prev = ' ';
        for c in line.chars() {
            match c {
                _ if escaped => escaped = false,
                '\\' if double => escaped = true,
                '"' if !single => double = !double,
                '\'' if !double => single = !single,
                '#' if !single && !double && (prev == ' ' || prev == '\t') => break,
                '[' | '{' if !single && !double => {
                    flow += 1;
                    if depth(flow) > MAX_DEPTH {
                        return Some((n + 1, depth(flow)));
                    }
                }
                ']' | '}' if !single && !double => flow = flow.saturating_sub(1),
                _ => {}
            }
            prev = c;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_pass_and_deep_nesting_is_found_fast() {
        let job = "name: a\nhorizon: 10\nparams:\n  m: 2 # a [comment\n  data: \"x [y\"\ngrid:\n  epsilon: {logspace: [0.1, 10, 3]}\n  graph: ['[', ring]\n";
        assert_eq!(too_deep(job), None);
        for every in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/jobs"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let text = std::fs::read_to_string(every.path()).unwrap_or_default();
            assert_eq!(too_deep(&text), None, "{}", every.path().display());
        }
        // Flow nesting 100,000 deep on one line; block sequences; indentation.
        let flow = format!(
            "horizon: 10\ngrid:\n  x: {}1{}\n",
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        assert_eq!(too_deep(&flow), Some((3, MAX_DEPTH + 1)));
        let dashes = format!("grid:\n  x: 1\nalgorithm:\n{}a\n", "- ".repeat(40));
        assert_eq!(too_deep(&dashes).map(|d| d.0), Some(4));
        let mut indented = String::new();
        for i in 0..40 {
            indented += &format!("{}k{i}:\n", " ".repeat(i));
        }
        assert_eq!(too_deep(&indented).map(|d| d.0), Some(MAX_DEPTH + 1));
    }
}
