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

/// Bandwidth only (no latency): the lit cases' tensors are tiny, and Shardy picks its plans by
/// the data moved.
fn bandwidth_only() -> CostModel {
    CostModel::uniform(Link::new(100e9, 0.0).unwrap())
}

fn plan_of(m: &str, shape: &[i64], src: &str, tgt: &str) -> Plan {
    plan(&mesh(m), shape, 4, &sharding(src), &sharding(tgt), &bandwidth_only()).unwrap()
}

/// The plan's steps as Shardy prints them, without operands.
fn texts(m: &str, shape: &[i64], src: &str, tgt: &str) -> Vec<String> {
    plan_of(m, shape, src, tgt).steps.iter().map(|s| s.text()).collect()
}

/// (mesh, shape, source, target, expected steps).
type Case<'a> = (&'a str, &'a [i64], &'a str, &'a str, &'a [&'a str]);

const M3: &str = r#"["x"=2, "y"=2, "z"=2]"#;

/// Cases of Shardy's `reshard_to_collectives.mlir` (same mesh, shape and shardings): the same
/// collectives in the same order.
#[test]
fn same_collectives_as_shardy() {
    let cases: &[Case<'_>] = &[
        (
            r#"["x"=2, "y"=2]"#,
            &[16, 8],
            r#"[{"y"}, {"x"}]"#,
            r#"[{"y"}, {}]"#,
            &[r#"sdy.all_gather [{}, {"x"}] out_sharding=<@mesh, [{"y"}, {}]>"#],
        ),
        (
            M3,
            &[16, 8],
            r#"[{"x", "y", "z"}, {}]"#,
            r#"[{"x"}, {}]"#,
            &[r#"sdy.all_gather [{"y", "z"}, {}] out_sharding=<@mesh, [{"x"}, {}]>"#],
        ),
        (
            r#"["x"=2, "y"=8]"#,
            &[16, 8],
            r#"[{"y"}, {"x"}]"#,
            r#"[{"y":(1)4}, {"x"}]"#,
            &[r#"sdy.all_gather [{"y":(4)2}, {}] out_sharding=<@mesh, [{"y":(1)4}, {"x"}]>"#],
        ),
        (
            M3,
            &[16, 8],
            r#"[{}, {}]"#,
            r#"[{"x"}, {"y", "z"}]"#,
            &[r#"sdy.all_slice [{"x"}, {"y", "z"}] out_sharding=<@mesh, [{"x"}, {"y", "z"}]>"#],
        ),
        (
            M3,
            &[16, 8, 8],
            r#"[{"x"}, {"y"}, {}]"#,
            r#"[{}, {"y"}, {"x"}]"#,
            &[r#"sdy.all_to_all [{"x"}: 0->2] out_sharding=<@mesh, [{}, {"y"}, {"x"}]>"#],
        ),
        (
            M3,
            &[16, 8],
            r#"[{"x", "z"}, {"y"}]"#,
            r#"[{"x"}, {"y", "z"}]"#,
            &[r#"sdy.all_to_all [{"z"}: 0->1] out_sharding=<@mesh, [{"x"}, {"y", "z"}]>"#],
        ),
        (
            M3,
            &[16, 8, 8],
            r#"[{"y"}, {"x"}, {}]"#,
            r#"[{}, {}, {"x", "y"}]"#,
            &[
                r#"sdy.all_to_all [{"x"}: 1->2] out_sharding=<@mesh, [{"y"}, {}, {"x"}]>"#,
                r#"sdy.all_to_all [{"y"}: 0->2] out_sharding=<@mesh, [{}, {}, {"x", "y"}]>"#,
            ],
        ),
        (
            r#"["x"=4, "y"=2, "z"=4]"#,
            &[16, 8, 8],
            r#"[{"x"}, {"z", "y"}, {}]"#,
            r#"[{"x", "z":(2)2}, {}, {"y"}]"#,
            &[
                r#"sdy.all_to_all [{"y"}: 1->2] out_sharding=<@mesh, [{"x"}, {"z"}, {"y"}]>"#,
                r#"sdy.all_to_all [{"z":(2)2}: 1->0] out_sharding=<@mesh, [{"x", "z":(2)2}, {"z":(1)2}, {"y"}]>"#,
                r#"sdy.all_gather [{}, {"z":(1)2}, {}] out_sharding=<@mesh, [{"x", "z":(2)2}, {}, {"y"}]>"#,
            ],
        ),
        (
            r#"["x"=2, "y"=2, "z"=2, "w"=4]"#,
            &[16, 8],
            r#"[{}, {"w":(1)2}]"#,
            r#"[{"w"}, {}]"#,
            &[
                r#"sdy.all_slice [{}, {"w":(2)2}] out_sharding=<@mesh, [{}, {"w"}]>"#,
                r#"sdy.all_to_all [{"w"}: 1->0] out_sharding=<@mesh, [{"w"}, {}]>"#,
            ],
        ),
        (
            M3,
            &[16, 8],
            r#"[{}, {"x"}]"#,
            r#"[{"x", "y"}, {"z"}]"#,
            &[
                r#"sdy.all_slice [{"y", "z"}, {}] out_sharding=<@mesh, [{"y", "z"}, {"x"}]>"#,
                r#"sdy.collective_permute out_sharding=<@mesh, [{"x", "y"}, {"z"}]>"#,
            ],
        ),
        (
            M3,
            &[16, 8],
            r#"[{"z"}, {"y"}]"#,
            r#"[{"z"}, {"x"}]"#,
            &[r#"sdy.collective_permute out_sharding=<@mesh, [{"z"}, {"x"}]>"#],
        ),
        (
            M3,
            &[16, 8],
            r#"[{"x", "y"}, {}]"#,
            r#"[{"z"}, {}]"#,
            &[
                r#"sdy.collective_permute out_sharding=<@mesh, [{"z", "y"}, {}]>"#,
                r#"sdy.all_gather [{"y"}, {}] out_sharding=<@mesh, [{"z"}, {}]>"#,
            ],
        ),
        (
            r#"["x"=2, "y"=2]"#,
            &[16, 8],
            r#"[{"x"}, {}]"#,
            r#"[{}, {"y"}]"#,
            &[
                r#"sdy.all_slice [{}, {"y"}] out_sharding=<@mesh, [{"x"}, {"y"}]>"#,
                r#"sdy.all_gather [{"x"}, {}] out_sharding=<@mesh, [{}, {"y"}]>"#,
            ],
        ),
        (
            r#"["x"=2, "y"=2]"#,
            &[16, 8],
            r#"[{"x"}, {"y"}]"#,
            r#"[{"y"}, {"x"}]"#,
            &[r#"sdy.collective_permute out_sharding=<@mesh, [{"y"}, {"x"}]>"#],
        ),
        (
            r#"["x"=4, "y"=2, "z"=4]"#,
            &[16, 8],
            r#"[{"x", "y"}, {"z"}]"#,
            r#"[{"y", "x"}, {"z"}]"#,
            &[r#"sdy.collective_permute out_sharding=<@mesh, [{"y", "x"}, {"z"}]>"#],
        ),
        (
            M3,
            &[16, 8],
            r#"[{"y", "x", "z"}, {}]"#,
            r#"[{"z"}, {}]"#,
            &[
                r#"sdy.collective_permute out_sharding=<@mesh, [{"z", "x", "y"}, {}]>"#,
                r#"sdy.all_gather [{"x", "y"}, {}] out_sharding=<@mesh, [{"z"}, {}]>"#,
            ],
        ),
        (
            M3,
            &[16, 8],
            r#"[{"x"}, {"y"}]"#,
            r#"[{"x", "y"}, {"z"}]"#,
            &[
                r#"sdy.all_slice [{"z"}, {}] out_sharding=<@mesh, [{"x", "z"}, {"y"}]>"#,
                r#"sdy.collective_permute out_sharding=<@mesh, [{"x", "y"}, {"z"}]>"#,
            ],
        ),
    ];
    for (m, shape, src, tgt, want) in cases {
        assert_eq!(
            texts(m, shape, src, tgt),
            want.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            "{src} -> {tgt} on {m}"
        );
    }
}

#[test]
fn no_collectives_when_only_open_dims_differ() {
    let p = plan_of(r#"["x"=2, "y"=2]"#, &[16, 8], r#"[{"x"}, {"y"}]"#, r#"[{"x", ?}, {"y", ?}]"#);
    assert!(p.steps.is_empty());
    assert_eq!(p.bytes, 0.0);
}

#[test]
fn costs_follow_the_ring_formulas() {
    // 16x8 f32 = 512 bytes; [{"x"}, {}] on x=4 holds 128 bytes per device.
    let m = r#"["x"=4]"#;
    let gather = plan_of(m, &[16, 8], r#"[{"x"}, {}]"#, r#"[{}, {}]"#);
    assert_eq!(gather.bytes, 3.0 * 128.0); // (n-1) * s
    let a2a = plan_of(m, &[16, 8], r#"[{"x"}, {}]"#, r#"[{}, {"x"}]"#);
    assert_eq!(a2a.steps[0].op.kind(), CollectiveKind::AllToAll);
    assert_eq!(a2a.bytes, 3.0 / 4.0 * 128.0); // (n-1)/n * s
    let ar = plan_of(m, &[16, 8], r#"[{}, {}], unreduced={"x"}"#, r#"[{}, {}]"#);
    assert_eq!(ar.steps[0].op.kind(), CollectiveKind::AllReduce);
    assert_eq!(ar.bytes, 2.0 * 3.0 / 4.0 * 512.0); // 2(n-1)/n * s
    let rs = plan_of(m, &[16, 8], r#"[{}, {}], unreduced={"x"}"#, r#"[{}, {"x"}]"#);
    assert_eq!(rs.text(), r#"sdy.reduce_scatter [{}, {"x"}] out_sharding=<@mesh, [{}, {"x"}]>"#);
    assert_eq!(rs.bytes, 3.0 / 4.0 * 512.0);
    // Seconds: alpha * (n - 1) + bytes / bandwidth, per axis link.
    let model = CostModel::uniform(Link::new(1e9, 1e-6).unwrap()).with_axis("x", Link::new(2e9, 3e-6).unwrap());
    let p = plan(&mesh(m), &[16, 8], 4, &sharding(r#"[{"x"}, {}]"#), &sharding(r#"[{}, {}]"#), &model).unwrap();
    assert!((p.seconds - (3.0 * 3e-6 + 384.0 / 2e9)).abs() < 1e-15);
    assert_eq!(p.naive_bytes, 384.0);
}

#[test]
fn cost_function_is_shared_and_prices_each_kind() {
    let m = mesh(r#"["x"=2, "y"=4]"#);
    let model = CostModel::uniform(Link::new(1e9, 1e-6).unwrap()).with_axis("y", Link::new(5e8, 2e-6).unwrap());
    let r = model.resolve(&m).unwrap();
    let group = [(0usize, 2i64), (1usize, 4i64)];
    let c = r.cost(CollectiveKind::AllGather, &group, 100.0);
    assert_eq!(c.bytes, 700.0);
    assert!((c.seconds - (1e-6 + 3.0 * 2e-6 + 700.0 / 5e8)).abs() < 1e-15);
    assert_eq!(r.cost(CollectiveKind::AllSlice, &group, 100.0).bytes, 0.0);
    assert_eq!(r.cost(CollectiveKind::CollectivePermute, &group, 100.0).bytes, 100.0);
    assert_eq!(r.cost(CollectiveKind::AllGather, &[], 100.0).seconds, 0.0);
    let bad = CostModel::default().with_axis("nope", Link::default());
    assert_eq!(bad.resolve(&m).unwrap_err().kind, ErrorKind::Mesh);
    assert!(Link::new(0.0, 1.0).is_err() && Link::new(1.0, -1.0).is_err() && Link::new(f64::NAN, 0.0).is_err());
}

#[test]
fn non_divisible_dims_count_padded_shards() {
    // 10 rows in 4 shards: 3 per device (padded); gathering sends 3 * 3 rows of 4 bytes.
    let p = plan_of(r#"["x"=4]"#, &[10], r#"[{"x"}]"#, r#"[{}]"#);
    assert_eq!(p.bytes, 3.0 * 3.0 * 4.0);
    // 10 in 4 shards (padded to 12) and 10 in 2 shards (10) do not nest: the dimension is
    // gathered whole, never gathered from 4 to 2 shards.
    let p = plan_of(r#"["x"=2, "y"=2]"#, &[10], r#"[{"x", "y"}]"#, r#"[{"x"}]"#);
    for s in &p.steps {
        if let Collective::AllGather { axes } = &s.op {
            assert!(s.out.dims[0].axes.is_empty() || axes[0].is_empty(), "{}", p.text());
        }
    }
    assert_eq!(p.steps.last().unwrap().out.dims[0].axes, sharding(r#"[{"x"}]"#).dims[0].axes);
}

#[test]
fn incompatible_sub_axes_gather_then_slice() {
    let p = plan_of(r#"["x"=6]"#, &[6, 2], r#"[{"x":(1)2}, {}]"#, r#"[{"x":(1)3}, {}]"#);
    assert_eq!(
        p.text(),
        "sdy.all_gather [{\"x\":(1)2}, {}] out_sharding=<@mesh, [{}, {}]>\nsdy.all_slice [{\"x\":(1)3}, {}] out_sharding=<@mesh, [{\"x\":(1)3}, {}]>"
    );
}

#[test]
fn errors_name_the_problem() {
    let m = mesh(r#"["x"=2, "y"=2]"#);
    let model = CostModel::default();
    let (a, b) = (sharding(r#"[{"x"}, {}]"#), sharding(r#"[{}, {}]"#));
    let rule = |r: shardwise::Result<Plan>| r.unwrap_err().rule();
    assert_eq!(rule(plan(&m, &[16], 4, &a, &b, &model)), Some("rank-mismatch"));
    assert_eq!(rule(plan(&m, &[16, -1], 4, &a, &b, &model)), Some("dynamic-dim"));
    assert_eq!(rule(plan(&m, &[16, 8], 0, &a, &b, &model)), Some("dtype-bytes"));
    let unknown = sharding(r#"[{"q"}, {}]"#);
    assert_eq!(rule(plan(&m, &[16, 8], 4, &unknown, &b, &model)), Some("unknown-axis"));
    let partial = sharding(r#"[{}, {}], unreduced={"x"}"#);
    let e = plan(&m, &[16, 8], 4, &b, &partial, &model).unwrap_err();
    assert_eq!(e.rule(), Some("unreduced-target"));
    assert!(e.message.contains("\"x\""), "{}", e.message);
    let other = parse_sharding(r#"#sdy.sharding<mesh<["x"=4]>, [{"x"}, {}]>"#).unwrap();
    assert_eq!(plan(&m, &[16, 8], 4, &other, &b, &model).unwrap_err().kind, ErrorKind::Mesh);
}
