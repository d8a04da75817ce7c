//! Graph size: building, scheduling, lowering, running and dropping graphs costs work linear in
//! the graph, and nothing recurses as deep as the graph. Each test counts work (scheduler visits,
//! distinct AST nodes, FLOPs the lowered kernels do, kernels) against the graph's own size, never
//! time; the deep ones run on a thread with a 256 KiB stack, so a recursion that follows the
//! graph's depth overflows it. Timings are printed by `examples/graph_scale.rs`.
//!
//! The reproducers (issue 16): a chain of `abs` (each `max(x, -x)` reads its input twice) grew
//! exponentially, 22 of them took 30 s and 4.4 GB; about 9,500 chained adds (and a `cat` of
//! 10,000 slices, as ONNX `Unique` builds) overflowed the stack; scheduling a JIT capture of
//! about 1,000 chained steps took minutes.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, RandomState};

use picograd_core::ast::{Ast, AstOp};
use picograd_core::jit::Jit;
use picograd_core::lazy::{LazyBuffer, LazyOp};
use picograd_core::realize::count_work;
use picograd_core::schedule::{schedule_with_visits, ScheduleItem, MAX_FUSED_DEPTH};
use picograd_core::Tensor;

/// Runs `f` on a thread with a 256 KiB stack (a recursion as deep as these graphs overflows it).
fn small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

/// The lazy graph below `x`: its nodes (bases and views, each once), its edges (a source or a
/// view's base), and how many nodes are ALU ops.
struct Size {
    nodes: usize,
    edges: usize,
    alus: usize,
}

fn graph_size(x: &LazyBuffer) -> Size {
    let mut seen = HashSet::new();
    let mut stack = vec![x.clone()];
    let (mut edges, mut alus) = (0, 0);
    while let Some(b) = stack.pop() {
        if !seen.insert(b.id()) {
            continue;
        }
        let next: Vec<LazyBuffer> = match b.op() {
            Some((op, srcs)) => {
                alus += usize::from(matches!(op, LazyOp::Alu(_)));
                srcs.to_vec()
            }
            None => vec![b.base().clone()],
        };
        edges += next.len();
        stack.extend(next);
    }
    Size {
        nodes: seen.len(),
        edges,
        alus,
    }
}

/// The scheduler's work bound: the graph walk visits each node once, the kernels read each edge
/// about once (two kernels may recompute a short chain, see the JIT test), and the reduce lookup
/// walks each node at most twice between realize points found.
fn linear_bound(g: &Size) -> u64 {
    3 * (g.nodes + g.edges) as u64
}

/// Distinct nodes of a kernel AST and its depth (a leaf is 0), counted without recursion.
fn ast_size(ast: &Ast) -> (usize, usize) {
    let order = ast.toposort();
    let mut depth: HashMap<usize, usize> = HashMap::new();
    for n in &order {
        let d = n
            .src()
            .iter()
            .map(|s| depth[&s.id()] + 1)
            .max()
            .unwrap_or(0);
        depth.insert(n.id(), d);
    }
    (order.len(), depth[&ast.id()])
}

fn schedule_of(x: &Tensor) -> (Vec<ScheduleItem>, u64) {
    schedule_with_visits(&[x.lazy().contiguous()]).unwrap()
}

/// `h -> |h - 0.75|`, `n` times: every `abs` is `max(h, -h)`, reading `h` twice.
fn abs_chain(x: &Tensor, n: usize) -> Tensor {
    (0..n).fold(x.clone(), |h, _| h.sub(0.75).abs())
}

#[test]
fn abs_chain_is_linear_not_exponential() {
    let xs = [-1.5f32, 2.0, -3.25, 0.5, 7.0, -0.125];
    let x = Tensor::from_slice(&xs, &[6]);
    let mut sizes = Vec::new();
    for n in [12usize, 24] {
        let y = abs_chain(&x, n);
        let g = graph_size(&y.lazy());
        let (nodes, alus) = (g.nodes, g.alus);
        let (items, visits) = schedule_of(&y);
        assert_eq!(items.len(), 1, "{n} abs: one fused kernel");
        let (ast_nodes, _) = ast_size(&items[0].ast);
        // The kernel is the graph: one AST node per op plus its leaves and the store (the
        // tree this DAG unfolds to has 2^n leaves).
        assert!(
            ast_nodes <= nodes + 1,
            "{n} abs: {ast_nodes} AST nodes for {nodes} graph nodes"
        );
        assert!(
            visits <= linear_bound(&g),
            "{n} abs: {visits} scheduler visits, {nodes} nodes"
        );
        // Each ALU op of the graph is lowered, and so runs, once per element.
        let work = count_work(&items).unwrap();
        assert_eq!(work.flops, (alus * xs.len()) as u64, "{n} abs: FLOPs");
        let uops = picograd_core::codegen::lower::lower(&items[0])
            .unwrap()
            .uops
            .len();
        assert!(uops <= 2 * alus + 32, "{n} abs: {uops} UOps for {alus} ops");
        sizes.push((ast_nodes, visits, uops));

        let want: Vec<f32> = xs
            .iter()
            .map(|&v| (0..n).fold(v, |h, _| (h - 0.75).abs()))
            .collect();
        assert_eq!(y.to_vec::<f32>().unwrap(), want, "{n} abs: values");
    }
    // Twice the chain, twice the work (an exponential blow-up would be 4096 times).
    let (a, b) = (sizes[0], sizes[1]);
    assert!(
        b.0 <= 2 * a.0 + 2 && b.1 <= 2 * a.1 + 2 && b.2 <= 2 * a.2,
        "{sizes:?}"
    );
}

#[test]
fn a_shared_node_is_one_ast_node_and_prints_once() {
    let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0], &[3]);
    let h = x.add(1.0);
    let y = h.mul(&h);
    let (items, _) = schedule_of(&y);
    let store = &items[0].ast;
    let mul = &store.src()[0];
    assert!(matches!(mul.op(), AstOp::Alu(_)));
    assert_eq!(
        mul.src()[0].id(),
        mul.src()[1].id(),
        "x*x reads one shared node"
    );
    // Printed in full once with a tag, then referred to by the tag.
    let text = store.to_string();
    assert_eq!(text.matches("ADD").count(), 1, "{text}");
    assert!(
        text.contains("ADD f32 #0") && text.trim_end().ends_with("#0"),
        "{text}"
    );
    // A tree spelling the same expression is equal and hashes the same.
    let add = &mul.src()[0];
    let copy = |a: &Ast| Ast::new(a.op().clone(), a.dtype(), a.src().to_vec());
    let tree = Ast::new(
        store.op().clone(),
        store.dtype(),
        vec![Ast::new(
            mul.op().clone(),
            mul.dtype(),
            vec![copy(add), copy(add)],
        )],
    );
    assert_ne!(tree.src()[0].src()[0].id(), tree.src()[0].src()[1].id());
    assert_eq!(&tree, store);
    let s = RandomState::new();
    assert_eq!(s.hash_one(&tree), s.hash_one(store));
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![4.0, 1.0, 16.0]);
}

#[test]
fn a_100k_add_chain_builds_schedules_runs_and_drops_on_a_small_stack() {
    small_stack(|| {
        const N: usize = 100_000;
        let x = Tensor::from_slice(&[1.0f32, -2.0, 0.5], &[3]);
        let y = (0..N).fold(x.clone(), |h, _| h.add(1.0));
        let g = graph_size(&y.lazy());
        let nodes = g.nodes;
        assert_eq!(g.alus, N);
        let (items, visits) = schedule_of(&y);
        assert!(
            visits <= linear_bound(&g),
            "{visits} scheduler visits for {nodes} nodes"
        );
        // The depth rule cuts the chain every MAX_FUSED_DEPTH ops, so no kernel is deeper.
        assert_eq!(items.len(), N.div_ceil(MAX_FUSED_DEPTH));
        let mut ast_nodes = 0;
        for it in &items {
            let (size, depth) = ast_size(&it.ast);
            assert!(depth <= MAX_FUSED_DEPTH + 1, "kernel depth {depth}");
            ast_nodes += size;
        }
        assert!(
            ast_nodes <= 2 * nodes,
            "{ast_nodes} AST nodes for {nodes} graph nodes"
        );
        assert_eq!(count_work(&items).unwrap().flops, (N * 3) as u64);
        drop(items);
        assert_eq!(
            y.to_vec::<f32>().unwrap(),
            vec![1.0 + N as f32, -2.0 + N as f32, 0.5 + N as f32]
        );
        // Dropping the last handles frees the whole chain.
        drop(y);
    });
}

#[test]
fn a_100k_gradient_history_backprops_and_drops_on_a_small_stack() {
    small_stack(|| {
        const N: usize = 100_000;
        let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]).requires_grad_(true);
        let y = (0..N).fold(x.clone(), |h, _| h.add(0.5)).sum(&[0], false);
        y.backward().unwrap();
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), vec![1.0, 1.0]);
        assert_eq!(y.item::<f32>().unwrap(), 3.0 + N as f32);
        drop(y);
    });
}

#[test]
fn a_cat_of_10k_slices_schedules_on_a_small_stack() {
    // What ONNX `Unique` builds for its values: a cat of one slice per distinct value, which is
    // a chain of adds of padded slices.
    small_stack(|| {
        for n in [1_000usize, 10_000] {
            let vals: Vec<f32> = (0..n).map(|i| (i * 7 % n) as f32).collect();
            let x = Tensor::from_slice(&vals, &[n]);
            x.realize().unwrap();
            let parts: Vec<Tensor> = (0..n).rev().map(|i| x.shrink(&[(i, i + 1)])).collect();
            let refs: Vec<&Tensor> = parts.iter().collect();
            let y = Tensor::cat(&refs, 0);
            let g = graph_size(&y.lazy());
            let (items, visits) = schedule_of(&y);
            assert!(
                visits <= linear_bound(&g),
                "{visits} visits for {} nodes",
                g.nodes
            );
            assert_eq!(items.len(), (n - 1).div_ceil(MAX_FUSED_DEPTH), "cat of {n}");
            if n == 1_000 {
                let want: Vec<f32> = vals.iter().rev().copied().collect();
                assert_eq!(y.to_vec::<f32>().unwrap(), want);
            }
        }
    });
}

/// `steps` steps of `h -> h/2 + sum(h)/8`: each reads `h` twice (elementwise and in a reduce
/// read back through an expand), about two kernels a step.
fn step_chain(x: &Tensor, steps: usize) -> Tensor {
    (0..steps).fold(x.clone(), |h, _| {
        h.mul(0.5).add(h.sum(&[0], true).mul(0.125))
    })
}

#[test]
fn a_jit_capture_of_1000_chained_steps() {
    small_stack(|| {
        const STEPS: usize = 1_000;
        let x = Tensor::from_slice(&[1.0f32, -2.0, 3.0, 0.25], &[4]);
        // Twice the steps, about twice the scheduling work (it was quadratic: each step's reduce
        // kernel recomputed the elementwise chain from the start; now `h`, read by a reduce and
        // by the next step, is realized every MAX_SHARED_DEPTH ops).
        let visits = |n: usize| schedule_of(&step_chain(&x, n)).1;
        let (half, full) = (visits(STEPS / 2), visits(STEPS));
        assert!(10 * full <= 21 * half, "{half} then {full}");
        let g = graph_size(&step_chain(&x, STEPS).lazy());
        assert!(
            full <= linear_bound(&g),
            "{full} visits for {} nodes",
            g.nodes
        );

        let f = Jit::new(|xs: &[Tensor]| Ok(vec![step_chain(&xs[0], STEPS)]));
        let first = f.call(std::slice::from_ref(&x)).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        let cap = f.capture().expect("the first call captures");
        let (items, _) = schedule_of(&step_chain(&x, STEPS));
        assert_eq!(
            cap.steps().len(),
            items.len(),
            "one captured step per kernel"
        );
        assert!(items.len() >= STEPS, "{} kernels", items.len());

        let x2 = Tensor::from_slice(&[0.5f32, 4.0, -1.0, 2.0], &[4]);
        let again = f.call(std::slice::from_ref(&x2)).unwrap()[0]
            .to_vec::<f32>()
            .unwrap();
        for (input, got) in [(x, first), (x2, again)] {
            let mut h = input.to_vec::<f32>().unwrap();
            for _ in 0..STEPS {
                let s = h.iter().fold(0.0f32, |a, v| a + v) * 0.125;
                h = h.iter().map(|v| v * 0.5 + s).collect();
            }
            assert_eq!(got, h);
        }
    });
}
