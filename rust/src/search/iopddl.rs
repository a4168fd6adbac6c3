//! The IOPDDL contest's JSON instances (`{"problem": {"name", "nodes": {"intervals", "costs",
//! "usages"}, "edges": {"nodes", "costs"}, "usage_limit"}}`; google/iopddl, `iopddl.cc`) read
//! straight into a [`StrategyGraph`]'s flat arrays by serde_json, without the per-number
//! objects of a decoded JSON tree.
//!
//! This is the fast path of `shardwise.search.read_instance`: it accepts exactly the
//! well-formed instances, and answers `None` for anything else (not JSON, a missing key, a
//! number that is not an int64, a node or edge [`StrategyGraph::validate`] or the contest's
//! rules refuse), which the Python reader then reads again to name the fault.

use serde::Deserialize;

use super::StrategyGraph;

#[derive(Deserialize)]
struct File {
    problem: Problem,
}

#[derive(Deserialize)]
struct Problem {
    // Present only as a string: a `null` name (which the Python reader prints as "None") or
    // any other value is left to it.
    #[serde(default, deserialize_with = "some_string")]
    name: Option<String>,
    nodes: Nodes,
    edges: Edges,
    #[serde(default)]
    usage_limit: Option<i64>,
}

fn some_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct Nodes {
    intervals: Vec<Vec<i64>>,
    costs: Vec<Vec<i64>>,
    usages: Vec<Vec<i64>>,
}

#[derive(Deserialize)]
struct Edges {
    nodes: Vec<Vec<i64>>,
    costs: Vec<Vec<i64>>,
}

/// A contest instance: its name (`""` when it has none) and its graph.
#[derive(Debug, Clone)]
pub struct Instance {
    pub name: String,
    pub graph: StrategyGraph,
}

/// The instance in `json` (UTF-8 JSON text), or `None` when it is not a well-formed instance
/// (module docs): every node has at least one strategy, as many usages as costs, usages >= 0
/// and an interval `[start, end)` with `0 <= start <= end`; every edge is a pair of existing
/// nodes with a `k(a) * k(b)` matrix; the usage limit, when given, is >= 0. Nothing is checked
/// twice: the result passes [`StrategyGraph::validate`].
pub fn parse_instance(json: &[u8]) -> Option<Instance> {
    let File { problem: p } = serde_json::from_slice(json).ok()?;
    let n = p.nodes.costs.len();
    if p.nodes.usages.len() != n || p.nodes.intervals.len() != n || p.edges.costs.len() != p.edges.nodes.len() {
        return None;
    }
    if p.usage_limit.is_some_and(|l| l < 0) {
        return None;
    }
    let mut offsets = Vec::with_capacity(n + 1);
    offsets.push(0usize);
    for (c, u) in p.nodes.costs.iter().zip(&p.nodes.usages) {
        if c.is_empty() || u.len() != c.len() || u.iter().any(|&x| x < 0) {
            return None;
        }
        offsets.push(offsets[offsets.len() - 1] + c.len());
    }
    let mut intervals = Vec::with_capacity(n);
    for iv in &p.nodes.intervals {
        match iv[..] {
            [a, b] if 0 <= a && a <= b => intervals.push((a, b)),
            _ => return None,
        }
    }
    let m = p.edges.nodes.len();
    let mut edges = Vec::with_capacity(m);
    let mut edge_offsets = Vec::with_capacity(m + 1);
    edge_offsets.push(0usize);
    for (pair, costs) in p.edges.nodes.iter().zip(&p.edges.costs) {
        let (a, b) = match pair[..] {
            [a, b] if (0..n as i64).contains(&a) && (0..n as i64).contains(&b) => (a as usize, b as usize),
            _ => return None,
        };
        if costs.len() != (offsets[a + 1] - offsets[a]) * (offsets[b + 1] - offsets[b]) {
            return None;
        }
        edges.push((a, b));
        edge_offsets.push(edge_offsets[edge_offsets.len() - 1] + costs.len());
    }
    let graph = StrategyGraph {
        offsets,
        cost: p.nodes.costs.concat(),
        usage: p.nodes.usages.concat(),
        intervals,
        edges,
        edge_offsets,
        edge_cost: p.edges.costs.concat(),
        usage_limit: p.usage_limit,
    };
    debug_assert!(graph.validate().is_ok());
    Some(Instance { name: p.name.unwrap_or_default(), graph })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: &str = r#"{"problem": {"name": "t", "nodes": {"intervals": [[0, 2], [1, 3]],
        "costs": [[1, 2], [3]], "usages": [[4, 5], [6]]}, "edges": {"nodes": [[0, 1]],
        "costs": [[7, 8]]}, "usage_limit": 10}}"#;

    #[test]
    fn reads_a_small_instance() {
        let i = parse_instance(SMALL.as_bytes()).unwrap();
        assert_eq!(i.name, "t");
        assert_eq!(i.graph.offsets, vec![0, 2, 3]);
        assert_eq!(i.graph.cost, vec![1, 2, 3]);
        assert_eq!(i.graph.usage, vec![4, 5, 6]);
        assert_eq!(i.graph.intervals, vec![(0, 2), (1, 3)]);
        assert_eq!(i.graph.edges, vec![(0, 1)]);
        assert_eq!(i.graph.edge_offsets, vec![0, 2]);
        assert_eq!(i.graph.edge_cost, vec![7, 8]);
        assert_eq!(i.graph.usage_limit, Some(10));
        assert!(i.graph.validate().is_ok());
    }

    #[test]
    fn refuses_what_is_not_a_well_formed_instance() {
        for (from, to) in [
            ("[[7, 8]]", "[[7]]"),                                // matrix not k(a) x k(b)
            ("[[0, 1]]", "[[0, 2]]"),                             // edge to a missing node
            ("[[0, 2], [1, 3]]", "[[2, 0], [1, 3]]"),             // interval end before start
            ("[[0, 2], [1, 3]]", "[[0], [1, 3]]"),                // interval not a pair
            ("[[4, 5], [6]]", "[[4, -5], [6]]"),                  // negative usage
            ("[[4, 5], [6]]", "[[4], [6]]"),                      // usages and costs differ in length
            ("[[1, 2], [3]]", "[[1, 2], []]"),                    // a node without strategies
            ("[[1, 2], [3]]", "[[1, 2.0], [3]]"),                 // a float
            ("[[1, 2], [3]]", "[[1, true], [3]]"),                // a boolean
            ("[[1, 2], [3]]", "[[1, 9223372036854775808], [3]]"), // beyond int64
            ("10}}", "-1}}"),                                     // negative usage limit
            ("10}}", "true}}"),                                   // usage limit not an integer
            ("\"t\"", "3"),                                       // name not a string
            ("\"t\"", "null"),                                    // a null name
            ("10}}", "10}"),                                      // not JSON
        ] {
            let text = SMALL.replacen(from, to, 1);
            assert_ne!(text, SMALL, "{from}");
            assert!(parse_instance(text.as_bytes()).is_none(), "{to}");
        }
        assert!(parse_instance(b"{}").is_none());
        assert!(parse_instance(b"\xff").is_none());
    }

    #[test]
    fn a_missing_limit_or_name_is_none_or_empty() {
        let text = SMALL.replacen(", \"usage_limit\": 10", "", 1).replacen("\"name\": \"t\", ", "", 1);
        let i = parse_instance(text.as_bytes()).unwrap();
        assert_eq!(i.graph.usage_limit, None);
        assert_eq!(i.name, "");
    }
}
