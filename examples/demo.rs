//! picograd's main example: the compiler at work, end to end.
//!
//! 1. the symbolic index algebra simplifying an index expression with bounds;
//! 2. a ShapeTracker turning movement ops into index arithmetic without copying;
//! 3. a small classifier's forward pass on real handwritten digits, fused into a few kernels,
//!    compiled to C and run — and checked against the interpreter.
//!
//! Run: `cargo run --release --example demo` (add `PICOGRAD_DEBUG=4` to see every kernel's C).

#[path = "common/digits.rs"]
mod digits;

use picograd::codegen::c::{render_kernel, CRenderOpts};
use picograd::realize::{count_work, lower};
use picograd::schedule::schedule;
use picograd::shape::{sints, ShapeTracker};
use picograd::symbolic::Node;
use picograd::{DType, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    picograd::init();
    symbolic();
    shapetracker()?;
    forward()?;
    Ok(())
}

fn symbolic() {
    println!("== 1. Symbolic index algebra (bounds drive simplification)");
    let a = Node::var("a", 0, 10);
    let b = Node::var("b", 0, 19);
    let e = (&a * 40 + &b).floordiv(20);
    println!(
        "   (a*40+b)//20 with a in [0,10], b in [0,19]  ->  {e}   bounds [{}, {}]",
        e.vmin(),
        e.vmax()
    );
    let x = Node::var("x", 0, 999);
    let m = (&x + &(&b * 10)).modulo(10);
    println!("   (x + b*10) % 10                              ->  {m}");
    println!(
        "   x % 1000 with x in [0,999]                  ->  {}",
        x.modulo(1000)
    );
}

fn shapetracker() -> picograd::Result<()> {
    println!("\n== 2. ShapeTracker: movement ops are index arithmetic, never copies");
    let st = ShapeTracker::from_shape(&sints(&[3, 4]));
    let t = st.permute(&[1, 0])?;
    println!("   3x4, transposed:         {t}");
    let f = t.reshape(&sints(&[12]))?;
    println!(
        "   ... then flattened:      {} views (one view cannot say it)",
        f.views().len()
    );
    let (idx, _) = f.expr_idxs(&[Node::var("i", 0, 11)]);
    println!("   buffer index of position i: {idx}");
    let p = st.pad(&[(1, 1), (0, 0)])?;
    let (idx, valid) = p.expr_idxs(&[Node::var("r", 0, 4), Node::var("c", 0, 3)]);
    println!("   padded rows: index {idx}, valid when {valid}");
    Ok(())
}

fn forward() -> Result<(), Box<dyn std::error::Error>> {
    println!("\n== 3. A digits classifier's forward pass, fused and compiled");
    let data = digits::load()?;
    let (_, test) = digits::split(&data);
    let batch = test.slice(0, 8);
    // Weights are random here: training arrives with autograd; the point is the compiler.
    let w1 = Tensor::randn(&[64, 32], 1).mul(0.25);
    let b1 = Tensor::zeros(&[32], DType::F32);
    let w2 = Tensor::randn(&[32, 10], 2).mul(0.25);
    let x = Tensor::try_from_slice(&batch.images, &[8, 64])?;
    // Weights live in buffers (as trained weights would).
    Tensor::realize_all(&[&w1, &b1, &w2])?;
    let logits = x.matmul(&w1).add(&b1).relu().matmul(&w2);
    let shifted = logits.sub(logits.max(&[-1], true));
    let e = shifted.exp();
    let probs = e.div(e.sum(&[-1], true));

    let items = schedule(&[probs.lazy().contiguous()])?;
    let work = count_work(&items)?;
    println!("   device: {}", probs.device().name());
    println!(
        "   relu(x @ W1 + b1) @ W2, then softmax: {} kernels, {} flops, {} bytes",
        work.kernels, work.flops, work.bytes
    );
    println!("   the C of the first kernel (x @ W1 + b1, then relu, in one loop nest):\n");
    let first = items
        .iter()
        .find(|i| !i.inputs.is_empty())
        .ok_or("no kernel")?;
    for line in render_kernel(
        &lower(first)?,
        &CRenderOpts {
            entry_wrapper: false,
            ..CRenderOpts::default()
        },
    )
    .lines()
    {
        println!("      {line}");
    }
    let got = probs.to_vec::<f32>()?;
    println!(
        "   class probabilities of the first image: {:.3?}",
        &got[..10]
    );

    // The same graph on the interpreter must agree.
    let interp = picograd::context::interp();
    let on = |t: &Tensor| t.to_device(&interp);
    let l2 = on(&x).matmul(&on(&w1)).add(on(&b1)).relu().matmul(&on(&w2));
    let e2 = l2.sub(l2.max(&[-1], true)).exp();
    let p2 = e2.div(e2.sum(&[-1], true)).to_vec::<f32>()?;
    let diff = got
        .iter()
        .zip(&p2)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!(
        "   {} vs INTERP: max |difference| = {diff:.2e}",
        probs.device().name()
    );
    Ok(())
}
