//! Redistribution planning: the collectives chosen for Shardy's `reshard_to_collectives.mlir`
//! cases, costs, padding and errors.

use shardwise::redistribution::{plan, Collective, CollectiveKind, CostModel, Link, Plan};
use shardwise::text::{parse_mesh, parse_sharding};
use shardwise::{ErrorKind, Mesh, TensorSharding};

fn mesh(text: &str) -> Mesh {
    parse_mesh(&format!("#sdy.mesh<{text}>")).unwrap()
}

fn sharding(body: &str) -> TensorSharding {
    parse_sharding(&format!("#sdy.sharding<@mesh, {body}>")).unwrap()
}

fn plan_of(m: &str, shape: &[i64], src: &str, tgt: &str) -> Plan {
    plan(&mesh(m), shape, 4, &sharding(src), &sharding(tgt), &CostModel::default()).unwrap()
}

/// The plan's steps as Shardy prints them, without operands.
fn texts(m: &str, shape: &[i64], src: &str, tgt: &str) -> Vec<String> {
    plan_of(m, shape, src, tgt).steps.iter().map(|s| s.text()).collect()
}

#[test]
fn scratch() {
    for (m, shape, s, t) in [
        (r#"["x"=2, "y"=2, "z"=2]"#, vec![16, 8, 8], r#"[{"y"}, {"x", "z"}, {}]"#, r#"[{}, {}, {"x", "y", "z"}]"#),
        (r#"["x"=2, "y"=2, "z"=2]"#, vec![16, 8], r#"[{"x"}, {"y"}]"#, r#"[{"x", "y"}, {"z"}]"#),
        (r#"["x"=2, "y"=2]"#, vec![16, 8], r#"[{"x"}, {"y"}]"#, r#"[{"y"}, {"x"}]"#),
        (r#"["x"=2, "y"=2, "z"=2, "w"=4]"#, vec![16, 8], r#"[{}, {"w":(1)2}]"#, r#"[{"w"}, {}]"#),
        (r#"["x"=2, "y"=3]"#, vec![12, 12], r#"[{"x"}, {"y"}]"#, r#"[{"y"}, {"x"}]"#),
        (r#"["x"=2, "y"=2]"#, vec![10, 7], r#"[{"x"}, {"y"}]"#, r#"[{"y"}, {"x"}]"#),
        (r#"["x"=4, "y"=2]"#, vec![10, 7], r#"[{"x"}, {"y"}]"#, r#"[{"y"}, {"x":(1)2}]"#),
        (r#"["x"=2, "y"=2]"#, vec![16, 8], r#"[{}, {"y"}], unreduced={"x"}"#, r#"[{"x"}, {"y"}]"#),
        (r#"["x"=2, "y"=2]"#, vec![16, 8], r#"[{"y"}, {}], unreduced={"x"}"#, r#"[{}, {}]"#),
    ] {
        let p = plan_of(m, &shape, s, t);
        println!("{s} -> {t}: bytes {} naive {}\n{}\n", p.bytes, p.naive_bytes, p.text());
    }
}
