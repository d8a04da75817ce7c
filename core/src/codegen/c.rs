//! The C renderer: turns a [`LinearKernel`] into one C99 function (plus an optional `NAME_entry`
//! wrapper the std runtime loads), and several kernels into one translation unit sharing a
//! prelude of helpers.
//!
//! Invariant: the C computes exactly what the interpreter computes (DESIGN.md, "Numeric
//! semantics") — except f32 `exp2`/`log2`/`sin` under [`CRenderOpts::vector_math`], which are
//! within 3 ulp of the exact value rather than libm's — and has no undefined behaviour for any
//! input: signed integer add/sub/mul/neg wrap
//! through unsigned types unless the UOps' bounds prove they cannot overflow; integer division
//! and modulo by zero give 0, `MIN / -1` wraps to `MIN` and `MIN % -1` is 0; float → int casts
//! truncate, saturate and send NaN to 0; a gated load reads memory only where its gate holds.
//! Decisions the interpreter must copy exactly:
//! - float `Max(a, b)` is `a < b ? b : a` (one compare and a conditional move on Cortex-M4F,
//!   no branch): a NaN `a` gives `a`, a NaN `b` with a number `a` gives `a`, and for equal
//!   operands (including `-0.0`/`+0.0`) the result is `a`. So ReLU (`max(x, 0)`) passes a NaN
//!   `x` through, and a max reduction (`max(acc, x)`) skips NaN values;
//! - f16/bf16 values compute in f32 and round (nearest-even) only at `Store`, `Cast` to f16/bf16
//!   and `Bitcast` from f16/bf16; a cast from f64 or an int to f16/bf16 goes through f32 first
//!   (two roundings);
//! - bool `Add`/`Sub`/`Mul` are or/xor/and, bool `Neg` is logical not, bool `Div`/`Mod`/floor
//!   forms act as on u8; a bool load gives `stored byte != 0`;
//! - `FloorDiv`/`FloorMod` by 0 give 0, `FloorDiv(MIN, -1)` wraps to `MIN`; unsigned ones are
//!   plain division/remainder.
//!
//! The output compiles warning-free under `-std=c99 -Wall -Wextra -Werror -pedantic` (clang and
//! gcc): values nothing depends on are not rendered, and unused parameters are voided.

mod helpers;
mod lanes;
mod math;
mod vmath;

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec;
use alloc::vec::Vec;

use self::helpers::{suffix, wrap_type, Helper, Needs};
use super::uops::{LinearKernel, UOp, UOpKind};
use crate::dtype::DType;
use crate::ops::{AluOp, Scalar};
use crate::{Error, Result};

/// How kernels are rendered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CRenderOpts {
    /// Call `<math.h>` (`exp2f`, `log2f`, `sinf`, `sqrtf`, `fmodf` and the double forms). Off,
    /// the C calls `pg_exp2f`, ... which the prelude declares and the target must supply.
    pub libm: bool,
    /// Also emit `void NAME_entry(void **bufs, const int32_t *vars)`, which casts and calls NAME.
    pub entry_wrapper: bool,
    /// With `libm` off: define the f32 math functions in the prelude with picograd's own code
    /// (see `c/math.rs`) instead of declaring them for the target to supply.
    pub freestanding_math: bool,
    /// Declare the kernels `static` (for one translation unit that calls them itself), each
    /// after a prototype that keeps it out of line (`noinline`): a compiler inlines a static
    /// function called once into its caller, where the kernel's loops share the register
    /// allocation of everything else the caller does. A kernel is a loop nest; its call costs a
    /// few instructions per run. Measured 2026-11-28 (`picograd compile`, gcc -O2, Cortex-M4,
    /// exact counts): KWS DS-CNN int8 6,183,390 -> 6,075,095 instructions per inference, fp32
    /// 4,661,791 -> 4,626,553; flash +112 and +108 B.
    pub static_kernels: bool,
    /// Render f32 `exp2`, `log2` and `sin` as picograd's branch-free `pg_vexp2f`, `pg_vlog2f`,
    /// `pg_vsinf` (see `c/vmath.rs`: ≤ 3 ulp), which clang vectorizes, instead of libm or the
    /// scalar freestanding functions. f64 math and `fmod` are unaffected.
    pub vector_math: bool,
    /// Before a loop whose body is straight-line code holding several stores (a kernel's
    /// upcast copies), emit `#pragma clang loop vectorize(disable)` (under `__clang__` only),
    /// so clang's SLP vectorizer packs the copies into vectors. Left to itself, clang's loop
    /// vectorizer takes such a loop first and vectorizes across iterations, gathering the
    /// copies with shuffles: the elementwise chain in `examples/bench.rs` ran 5× slower.
    pub slp_upcasts: bool,
    /// Compute index arithmetic (i32 loop counters, and i32 `+ - *` whose bounds prove no
    /// wrap) in `int64_t`. Worth it on 64-bit targets: an address is 64-bit, and from i32
    /// indices clang must prove each sign extension away (`IndVarSimplify` alone took 17–27% of
    /// its time on resnet18's kernels). The values are the same,
    /// since the bounds prove the i32 results fit. Off for 32-bit targets (exported code).
    pub wide_index: bool,
}

impl CRenderOpts {
    /// The desktop Clang device's settings: libm, entry wrappers, vectorizable math, SLP for
    /// upcast copies, 64-bit index arithmetic. (Vector types come from the kernels' vector
    /// UOps, `c/lanes.rs`.)
    pub fn host() -> CRenderOpts {
        CRenderOpts {
            vector_math: true,
            slp_upcasts: true,
            wide_index: true,
            ..CRenderOpts::default()
        }
    }
}

impl Default for CRenderOpts {
    fn default() -> Self {
        CRenderOpts {
            libm: true,
            entry_wrapper: true,
            freestanding_math: false,
            static_kernels: false,
            vector_math: false,
            slp_upcasts: false,
            wide_index: false,
        }
    }
}

/// One C99 translation unit holding one kernel (and its entry wrapper if asked).
pub fn render_kernel(k: &LinearKernel, opts: &CRenderOpts) -> Result<String> {
    render_program(&[k], opts)
}

/// One C99 translation unit holding one kernel whose iterations are divided among `cores`
/// cores on the loops [`split::split_loops`](super::split::split_loops) chooses: the function takes
/// `int32_t core_id, int32_t core_count` last, and the entry wrapper reads them after the
/// variables. A kernel with no splittable loop, or `cores` 1, renders as [`render_kernel`] does.
pub fn render_kernel_split(k: &LinearKernel, cores: usize, opts: &CRenderOpts) -> Result<String> {
    render_program_split(&[(k, cores)], opts)
}

/// One C99 translation unit: the helpers the kernels need, once, then each kernel in order.
/// Kernel names must be distinct C identifiers.
pub fn render_program(kernels: &[&LinearKernel], opts: &CRenderOpts) -> Result<String> {
    let plain: Vec<(&LinearKernel, bool)> = kernels.iter().map(|k| (*k, false)).collect();
    render_program_aliased(&plain, opts)
}

/// [`render_program`], where a kernel flagged `true` may be called with its output aliasing an
/// input (an in-place update): its parameters are rendered without `restrict`.
pub fn render_program_aliased(
    kernels: &[(&LinearKernel, bool)],
    opts: &CRenderOpts,
) -> Result<String> {
    render_unit(kernels, opts, |w, _, aliased| w.restrict = !aliased)
}

/// One C99 translation unit of several kernels, each with the cores it is split among (1: not
/// split) and rendered as [`render_kernel_split`] renders it: one compile for a whole schedule.
/// Kernel names must be distinct C identifiers.
pub fn render_program_split(
    kernels: &[(&LinearKernel, usize)],
    opts: &CRenderOpts,
) -> Result<String> {
    render_unit(kernels, opts, |w, k, cores| {
        w.split = (cores > 1)
            .then(|| super::split::split_loops(k, cores))
            .flatten()
            .unwrap_or_default();
    })
}

/// The helpers the kernels need, once, then each kernel in order, its writer set up by `setup`
/// with the kernel's flag.
fn render_unit<F: Copy>(
    kernels: &[(&LinearKernel, F)],
    opts: &CRenderOpts,
    setup: impl Fn(&mut Writer<'_>, &LinearKernel, F),
) -> Result<String> {
    let mut needs = Needs::default();
    let bodies: Vec<String> = kernels
        .iter()
        .map(|&(k, flag)| {
            let mut w = Writer::new(k, opts, &mut needs);
            setup(&mut w, k, flag);
            w.render()
        })
        .collect::<Result<_>>()?;
    let mut out = needs.prelude();
    for b in bodies {
        out.push('\n');
        out.push_str(&b);
    }
    Ok(out)
}

/// The C definitions of picograd's freestanding f32 math (`pg_exp2f`, `pg_log2f`, `pg_sinf`,
/// `pg_sqrtf`, `pg_fmodf`) with the bit helpers they use, as one translation unit's prelude:
/// for tests, and for targets that want the functions outside a rendered program.
pub fn freestanding_math_c() -> String {
    let mut needs = Needs::default();
    needs.add(Helper::FreestandingF32);
    needs.prelude()
}

/// The C definitions of picograd's vectorizable f32 math (`pg_vexp2f`, `pg_vlog2f`,
/// `pg_vsinf`) with the bit helpers they use, as one translation unit's prelude (for tests).
pub fn vector_math_c() -> String {
    let mut needs = Needs::default();
    needs.add(Helper::VectorF32);
    needs.prelude()
}

/// Renders one kernel, recording the helpers it calls.
struct Writer<'a> {
    k: &'a LinearKernel,
    opts: &'a CRenderOpts,
    needs: &'a mut Needs,
    /// The C spelling of each UOp's value (empty until rendered).
    names: Vec<String>,
    live: Vec<bool>,
    range: Vec<Option<(i128, i128)>>,
    out: String,
    depth: usize,
    loops: usize,
    accs: usize,
    /// Render buffer parameters `restrict`.
    restrict: bool,
    /// The loops divided among cores, one per region (see `render_kernel_split`); empty: the
    /// kernel is not split.
    split: Vec<usize>,
    /// Loops (by UOp index) to leave to the SLP vectorizer (see `CRenderOpts::slp_upcasts`).
    slp: Vec<bool>,
    /// Rendering the body of such a loop.
    in_slp: bool,
    /// The first UOp found that C cannot express (an op on a dtype it is not defined for): the
    /// rendering is then discarded and this returned.
    error: Option<Error>,
}

impl<'a> Writer<'a> {
    fn new(k: &'a LinearKernel, opts: &'a CRenderOpts, needs: &'a mut Needs) -> Self {
        Writer {
            k,
            opts,
            needs,
            names: vec![String::new(); k.uops.len()],
            live: liveness(&k.uops),
            range: int_ranges(&k.uops),
            out: String::new(),
            depth: 1,
            loops: 0,
            accs: 0,
            restrict: true,
            split: Vec::new(),
            slp: if opts.slp_upcasts {
                straight_line_multi_store_loops(&k.uops)
            } else {
                Vec::new()
            },
            in_slp: false,
            error: None,
        }
    }

    fn render(mut self) -> Result<String> {
        let storage = if self.opts.static_kernels {
            "static "
        } else {
            ""
        };
        let (name, params) = (&self.k.name, self.params());
        let proto = if self.opts.static_kernels {
            format!("__attribute__((noinline)) static void {name}({params});\n")
        } else {
            String::new()
        };
        self.out = format!("{proto}{storage}void {name}({params}) {{\n");
        self.void_unused_params();
        for i in 0..self.k.uops.len() {
            if self.live[i] {
                self.uop(i);
            }
        }
        self.out.push_str("}\n");
        if self.opts.entry_wrapper {
            self.entry();
        }
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.out),
        }
    }

    /// Records that `op` on `dt` has no C form (an invariant the linearizer should have kept)
    /// and returns a placeholder; [`Writer::render`] then fails with the recorded error.
    fn undefined(&mut self, op: AluOp, dt: DType) -> String {
        if self.error.is_none() {
            self.error = Some(Error::internal(format!(
                "C renderer: kernel {}: {op} is not defined on {dt}",
                self.k.name
            )));
        }
        "0".into()
    }

    fn params(&self) -> String {
        let mut ps: Vec<String> = self
            .k
            .bufs
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let c = if b.writable { "" } else { "const " };
                let r = if self.restrict { "restrict " } else { "" };
                format!("{c}{} *{r}data{i}", b.dtype.c_storage())
            })
            .collect();
        ps.extend(self.k.vars.iter().map(|(n, _, _)| format!("int32_t {n}")));
        if !self.split.is_empty() {
            ps.push(String::from("int32_t core_id, int32_t core_count"));
        }
        if ps.is_empty() {
            return String::from("void");
        }
        ps.join(", ")
    }

    /// `(void)p;` for every parameter no live UOp reads (else `-Wunused-parameter` fires).
    fn void_unused_params(&mut self) {
        let live_uops = || self.k.uops.iter().zip(&self.live).filter(|(_, l)| **l);
        let mut unused = Vec::new();
        for i in 0..self.k.bufs.len() {
            let used = live_uops()
                .any(|(u, _)| matches!(u.kind, UOpKind::DefineGlobal { idx, .. } if idx == i));
            if !used {
                unused.push(format!("data{i}"));
            }
        }
        for (n, _, _) in &self.k.vars {
            let used = live_uops()
                .any(|(u, _)| matches!(&u.kind, UOpKind::DefineVar { name, .. } if name == n));
            if !used {
                unused.push(n.to_string());
            }
        }
        for p in unused {
            self.line(&format!("(void){p};"));
        }
    }

    fn entry(&mut self) {
        let mut args: Vec<String> = self
            .k
            .bufs
            .iter()
            .enumerate()
            .map(|(i, b)| {
                let c = if b.writable { "" } else { "const " };
                format!("({c}{} *)bufs[{i}]", b.dtype.c_storage())
            })
            .collect();
        let nvars = self.k.vars.len() + if self.split.is_empty() { 0 } else { 2 };
        args.extend((0..nvars).map(|i| format!("vars[{i}]")));
        let name = &self.k.name;
        self.out.push_str(&format!(
            "\nvoid {name}_entry(void **bufs, const int32_t *vars) {{\n"
        ));
        if self.k.bufs.is_empty() {
            self.out.push_str("  (void)bufs;\n");
        }
        if nvars == 0 {
            self.out.push_str("  (void)vars;\n");
        }
        self.out
            .push_str(&format!("  {name}({});\n}}\n", args.join(", ")));
    }

    fn line(&mut self, s: &str) {
        for _ in 0..self.depth {
            self.out.push_str("  ");
        }
        self.out.push_str(s);
        self.out.push('\n');
    }

    fn src(&self, i: usize, n: usize) -> &str {
        &self.names[self.k.uops[i].src[n] as usize]
    }

    fn src_dtype(&self, i: usize, n: usize) -> DType {
        self.k.uops[self.k.uops[i].src[n] as usize].dtype
    }

    /// Declares `const T val{i} = expr;` and names UOp `i` after it.
    fn value(&mut self, i: usize, expr: &str) {
        let name = format!("val{i}");
        let u = &self.k.uops[i];
        let index_math = matches!(u.kind, UOpKind::Alu(AluOp::Add | AluOp::Sub | AluOp::Mul));
        let wide = self.in_slp || self.opts.wide_index;
        let t = if wide && u.dtype == DType::I32 && index_math && self.range[i].is_some() {
            // Bounds prove the value fits i32, so i64 holds the same value; clang proves the
            // copies' addresses consecutive from i64 arithmetic (not from i32 when the loop
            // starts at a runtime value, as a thread's share does), and needs no sign
            // extension to address memory (`wide_index`).
            "int64_t"
        } else {
            u.dtype.c_compute()
        };
        self.line(&format!("const {t} {name} = {expr};"));
        self.names[i] = name;
    }

    fn uop(&mut self, i: usize) {
        let u: &UOp = &self.k.uops[i];
        match &u.kind {
            UOpKind::DefineGlobal { idx, .. } => self.names[i] = format!("data{idx}"),
            UOpKind::DefineVar { name, .. } => self.names[i] = name.to_string(),
            UOpKind::DefineLocal { size } => {
                // 8-byte aligned: its pairs of words are read by `ldrd` (`pg_ld_pairs`).
                let t = u.dtype.c_storage();
                self.line(&format!(
                    "{t} local{i}[{size}] __attribute__((aligned(8)));"
                ));
                self.names[i] = format!("local{i}");
            }
            UOpKind::PairWiden => {
                // Four i16 lanes as two words of halfword pairs, `val{i}_lo` and `val{i}_hi`.
                self.needs.add(Helper::SmladPairs);
                let x = self.src(i, 0).to_string();
                self.line(&format!("const int32_t val{i}_lo = pg_widen_lo({x});"));
                self.line(&format!("const int32_t val{i}_hi = pg_widen_hi({x});"));
                self.names[i] = format!("val{i}");
            }
            UOpKind::Const(s) => self.names[i] = literal(*s),
            UOpKind::Loop => self.loop_open(i),
            UOpKind::EndLoop => self.loop_close(),
            UOpKind::DefineAcc(s) => self.define_acc(i, *s),
            UOpKind::Assign => self.assign(i),
            UOpKind::Load => self.load(i),
            UOpKind::Store => self.store(i),
            UOpKind::Alu(op) => {
                let e = self.alu(i, *op);
                self.value(i, &e);
            }
            UOpKind::Cast => {
                let x = self.src(i, 0).to_string();
                let e = self.cast(self.src_dtype(i, 0), u.dtype, x.clone());
                if e == x {
                    // Same compute value (e.g. f16 → f32): no new local.
                    self.names[i] = x;
                } else {
                    self.value(i, &e);
                }
            }
            UOpKind::Bitcast => {
                let e = self.bitcast(i);
                self.value(i, &e);
            }
            UOpKind::DualMac => {
                let e = self.dual_mac(i);
                self.value(i, &e);
            }
            UOpKind::VecAcc { init, lanes } => self.vec_acc(i, *init, usize::from(*lanes)),
            UOpKind::VecLoad { lanes, stride } => {
                self.vec_load(i, usize::from(*lanes), usize::from(*stride))
            }
            UOpKind::VecStore { lanes } => self.vec_store(i, usize::from(*lanes)),
            UOpKind::VecAlu { op, lanes } => self.vec_alu(i, *op, usize::from(*lanes)),
            UOpKind::Vectorize => self.vectorize(i),
            UOpKind::Gep(n) => {
                let e = format!("{}[{n}]", self.src(i, 0));
                self.value(i, &e);
            }
        }
    }

    /// `pg_smlad_b` (both lanes' factors i8) or `pg_smlad_h` (halfwords) — `__smlad` under
    /// `__ARM_FEATURE_DSP`, portable C elsewhere.
    fn dual_mac(&mut self, i: usize) -> String {
        if self.k.uops[i].src.len() == 3 && self.src_dtype(i, 1) == DType::I16 {
            // Pre-widened operands (four i16 lanes as two words each): two `smlad`s.
            let (acc, a, b) = (self.src(i, 0), self.src(i, 1), self.src(i, 2));
            let e = format!("pg_smlad2(pg_smlad2({acc}, {a}_lo, {b}_lo), {a}_hi, {b}_hi)");
            self.needs.add(Helper::SmladPairs);
            return e;
        }
        if self.k.uops[i].src.len() == 3 {
            // The packed form: two words of four i8 lanes (`VecLoad`s printed as `pg_ld_i8x4`).
            let args: Vec<String> = (0..3).map(|n| self.src(i, n).to_string()).collect();
            return self.call(Helper::SmladWords, "pg_smlad4_b", &args.join(", "));
        }
        let args: Vec<String> = (0..5).map(|n| self.src(i, n).to_string()).collect();
        let bytes = (1..5).all(|n| self.src_dtype(i, n) == DType::I8);
        let (h, f) = if bytes {
            (Helper::SmladBytes, "pg_smlad_b")
        } else {
            (Helper::SmladHalves, "pg_smlad_h")
        };
        self.call(h, f, &args.join(", "))
    }

    // ---- control flow and accumulators ----

    fn loop_open(&mut self, i: usize) {
        let name = format!("ridx{}", self.loops);
        self.loops += 1;
        let t = self.k.uops[i].dtype.c_compute();
        let (mut s, mut e) = (self.src(i, 0).to_string(), self.src(i, 1).to_string());
        if self.split.contains(&i) {
            // This core's share of [0, e): [e*id/count, e*(id+1)/count), in 64-bit.
            let part = |id: &str| format!("({t})(((int64_t){e} * ({id})) / core_count)");
            let (lo, hi) = (part("core_id"), part("core_id + 1"));
            self.line(&format!("const {t} {name}_lo = {lo}, {name}_hi = {hi};"));
            (s, e) = (format!("{name}_lo"), format!("{name}_hi"));
        }
        let t = match self.slp_prologue(i, t) {
            "int32_t" if self.opts.wide_index => "int64_t",
            t => t,
        };
        let l = format!("for ({t} {name} = {s}; {name} < {e}; {name}++) {{");
        self.line(&l);
        self.names[i] = name;
        self.depth += 1;
    }

    /// For a loop left to the SLP vectorizer: the pragma that keeps the loop vectorizer off,
    /// and an i64 counter instead of an i32 one (see `value`). Returns the counter's C type.
    fn slp_prologue(&mut self, i: usize, t: &'static str) -> &'static str {
        self.in_slp = self.slp.get(i) == Some(&true);
        if !self.in_slp {
            return t;
        }
        // Column 0: preprocessor lines are not indented with the code.
        self.out
            .push_str("#if defined(__clang__)\n#pragma clang loop vectorize(disable)\n#endif\n");
        if t == "int32_t" {
            "int64_t"
        } else {
            t
        }
    }

    fn loop_close(&mut self) {
        self.in_slp = false; // an SLP loop has no nested loop, so this closes it
        self.depth -= 1;
        self.line("}");
    }

    fn define_acc(&mut self, i: usize, init: Scalar) {
        let name = format!("acc{}", self.accs);
        self.accs += 1;
        let t = self.k.uops[i].dtype.c_compute();
        self.line(&format!("{t} {name} = {};", literal(init)));
        self.names[i] = name;
    }

    fn assign(&mut self, i: usize) {
        let (acc, v) = (self.src(i, 0).to_string(), self.src(i, 1));
        self.line(&format!("{acc} = {v};"));
        self.names[i] = acc;
    }

    // ---- memory ----

    fn load(&mut self, i: usize) {
        let dt = self.k.uops[i].dtype;
        let raw = format!("{}[{}]", self.src(i, 0), self.src(i, 1));
        let v = self.storage_to_compute(dt, raw);
        let e = if self.k.uops[i].src.len() > 2 {
            format!("{} ? {v} : {}", self.src(i, 2), zero(dt))
        } else {
            v
        };
        self.value(i, &e);
    }

    fn store(&mut self, i: usize) {
        let dt = self.k.uops[i].dtype;
        let v = self.compute_to_storage(dt, self.src(i, 2).to_string());
        let s = format!("{}[{}] = {v};", self.src(i, 0), self.src(i, 1));
        if self.k.uops[i].src.len() > 3 {
            let g = format!("if ({}) {s}", self.src(i, 3));
            self.line(&g);
        } else {
            self.line(&s);
        }
    }

    /// A stored element as its compute value.
    fn storage_to_compute(&mut self, dt: DType, raw: String) -> String {
        match dt {
            DType::F16 => self.call(Helper::F16ToF32, "pg_f16_to_f32", &raw),
            DType::BF16 => self.call(Helper::Bf16ToF32, "pg_bf16_to_f32", &raw),
            DType::Bool => format!("({raw} != 0)"),
            _ => raw,
        }
    }

    /// A compute value as its stored element.
    fn compute_to_storage(&mut self, dt: DType, v: String) -> String {
        match dt {
            DType::F16 => self.call(Helper::F32ToF16, "pg_f32_to_f16", &v),
            DType::BF16 => self.call(Helper::F32ToBf16, "pg_f32_to_bf16", &v),
            _ => v,
        }
    }

    fn call(&mut self, h: Helper, f: &str, args: &str) -> String {
        self.needs.add(h);
        format!("{f}({args})")
    }

    // ---- ALU ----

    fn alu(&mut self, i: usize, op: AluOp) -> String {
        let u = &self.k.uops[i];
        let dt = if op.is_comparison() || op == AluOp::Where || op == AluOp::MulWide {
            self.src_dtype(i, u.src.len() - 1)
        } else {
            u.dtype
        };
        let a: Vec<String> = (0..u.src.len())
            .map(|n| self.src(i, n).to_string())
            .collect();
        match op {
            AluOp::CmpLt => format!("({} < {})", a[0], a[1]),
            AluOp::CmpEq => format!("({} == {})", a[0], a[1]),
            AluOp::Where => format!("{} ? {} : {}", a[0], a[1], a[2]),
            // i8/u8/i16 products fit in i32: no wrap to guard.
            AluOp::MulWide if op.defined_on(dt) => {
                format!("(int32_t)({}) * (int32_t)({})", a[0], a[1])
            }
            AluOp::Requant if op.defined_on(dt) => {
                let args = a.join(", ");
                self.call(Helper::Requant, "pg_requant", &args)
            }
            AluOp::Clamp if op.defined_on(dt) => {
                let args = a.join(", ");
                self.call(Helper::Clamp, "pg_clamp", &args)
            }
            AluOp::Xor | AluOp::And | AluOp::Or if !dt.is_float() => match bit_sym(op) {
                Some(sym) => format!("{} {sym} {}", a[0], a[1]),
                None => self.undefined(op, dt),
            },
            _ if dt.is_float() => self.alu_float(op, dt, &a),
            _ if dt == DType::Bool => self.alu_bool(op, &a),
            _ => self.alu_int(i, op, dt, &a),
        }
    }

    fn alu_float(&mut self, op: AluOp, dt: DType, a: &[String]) -> String {
        let one = if dt == DType::F64 { "1.0" } else { "1.0f" };
        match op {
            AluOp::Exp2 | AluOp::Log2 | AluOp::Sin | AluOp::Sqrt => self.math(op.name(), dt, a),
            AluOp::Mod => self.math("fmod", dt, a),
            AluOp::Neg => format!("-{}", a[0]),
            AluOp::Recip => format!("{one} / {}", a[0]),
            AluOp::Add | AluOp::Sub | AluOp::Mul | AluOp::Div => match arith_sym(op) {
                Some(sym) => format!("{} {sym} {}", a[0], a[1]),
                None => self.undefined(op, dt),
            },
            // The contract's NaN rule (module doc): the cheapest form on small cores.
            AluOp::Max => format!("{0} < {1} ? {1} : {0}", a[0], a[1]),
            AluOp::MulAcc => format!("{} * {} + {}", a[0], a[1], a[2]),
            // The builtin, not `fmaf` from <math.h>: it needs no libm, and with hardware FMA
            // (the only targets the linearizer emits it for) it compiles to one instruction.
            AluOp::Fma if dt == DType::F64 => {
                format!("__builtin_fma({}, {}, {})", a[0], a[1], a[2])
            }
            AluOp::Fma => format!("__builtin_fmaf({}, {}, {})", a[0], a[1], a[2]),
            _ => self.undefined(op, dt),
        }
    }

    /// A libm call (`exp2f(x)`), or with libm off the target-supplied `pg_exp2f(x)`; with
    /// `vector_math`, f32 `exp2`/`log2`/`sin` call the branch-free `pg_vexp2f(x)`, ...
    fn math(&mut self, name: &'static str, dt: DType, a: &[String]) -> String {
        let f = if dt == DType::F64 { "" } else { "f" };
        let args = a.join(", ");
        if self.opts.vector_math && dt != DType::F64 && matches!(name, "exp2" | "log2" | "sin") {
            self.needs.add(Helper::VectorF32);
            return format!("pg_v{name}f({args})");
        }
        if self.opts.libm {
            self.needs.math_h = true;
            return format!("{name}{f}({args})");
        }
        let full: &'static str = match (name, dt == DType::F64) {
            ("exp2", false) => "exp2f",
            ("log2", false) => "log2f",
            ("sin", false) => "sinf",
            ("sqrt", false) => "sqrtf",
            ("fmod", false) => "fmodf",
            (n, _) => n,
        };
        let fdt = if dt == DType::F64 { dt } else { DType::F32 };
        if self.opts.freestanding_math && fdt == DType::F32 {
            self.needs.add(Helper::FreestandingF32);
        } else {
            self.needs.add(Helper::ExternMath(full, fdt));
        }
        format!("pg_{full}({args})")
    }

    fn alu_bool(&mut self, op: AluOp, a: &[String]) -> String {
        match op {
            AluOp::Add => format!("{} | {}", a[0], a[1]),
            AluOp::Sub => format!("{} ^ {}", a[0], a[1]),
            AluOp::Mul => format!("{} & {}", a[0], a[1]),
            AluOp::MulAcc => format!("({} & {}) | {}", a[0], a[1], a[2]),
            AluOp::Neg => format!("!{}", a[0]),
            AluOp::Max => format!("{0} > {1} ? {0} : {1}", a[0], a[1]),
            AluOp::Div | AluOp::Mod | AluOp::FloorDiv | AluOp::FloorMod => {
                self.int_div(op, DType::U8, a, false)
            }
            _ => self.undefined(op, DType::Bool),
        }
    }

    fn alu_int(&mut self, i: usize, op: AluOp, dt: DType, a: &[String]) -> String {
        let u = &self.k.uops[i];
        let safe = self.range[i].is_some();
        let pos_div = u.src.len() == 2 && self.range_of(u.src[1]).is_some_and(|r| r.0 > 0);
        let nonneg = self.range_of(u.src[0]).is_some_and(|r| r.0 >= 0);
        match op {
            AluOp::Add | AluOp::Sub | AluOp::Mul => match arith_sym(op) {
                Some(sym) => wrap_binop(dt, sym, a, safe),
                None => self.undefined(op, dt),
            },
            AluOp::MulAcc => wrap_mulacc(dt, a),
            AluOp::Neg => wrap_neg(dt, &a[0], safe),
            AluOp::Max => format!("{0} > {1} ? {0} : {1}", a[0], a[1]),
            AluOp::Div | AluOp::Mod => self.int_div(op, dt, a, pos_div),
            AluOp::FloorDiv | AluOp::FloorMod => self.int_div(op, dt, a, pos_div && nonneg),
            _ => self.undefined(op, dt),
        }
    }

    fn range_of(&self, src: u32) -> Option<(i128, i128)> {
        self.range[src as usize]
    }

    /// Division and remainder; `plain` when bounds prove C's `/` and `%` are exact and safe.
    fn int_div(&mut self, op: AluOp, dt: DType, a: &[String], plain: bool) -> String {
        let is_div = matches!(op, AluOp::Div | AluOp::FloorDiv);
        if plain {
            return format!("{} {} {}", a[0], if is_div { "/" } else { "%" }, a[1]);
        }
        let floor = matches!(op, AluOp::FloorDiv | AluOp::FloorMod);
        let args = format!("{}, {}", a[0], a[1]);
        if floor && !dt.is_unsigned() {
            let (h, f) = if is_div {
                (Helper::FloorDiv, "pg_floordiv")
            } else {
                (Helper::FloorMod, "pg_floormod")
            };
            return format!("({}){}", dt.c_compute(), self.call(h, f, &args));
        }
        let (h, f) = if is_div {
            (Helper::Div(dt), format!("pg_div_{}", suffix(dt)))
        } else {
            (Helper::Mod(dt), format!("pg_mod_{}", suffix(dt)))
        };
        self.call(h, &f, &args)
    }

    // ---- casts ----

    /// `x` (of dtype `from`) converted to `to`'s compute value, as `Cast` defines.
    fn cast(&mut self, from: DType, to: DType, x: String) -> String {
        if to == DType::Bool {
            return format!("({x} != 0)");
        }
        if to.is_float() {
            let v = if from.c_compute() == to.c_compute() {
                x
            } else {
                format!("({}){x}", to.c_compute())
            };
            return self.round_to(to, v);
        }
        if from.is_float() {
            let f = if from == DType::F64 { from } else { DType::F32 };
            let name = format!("pg_cast_{}_{}", suffix(f), suffix(to));
            return self.call(Helper::FloatToInt(f, to), &name, &x);
        }
        if from == to {
            return x;
        }
        if from == DType::Bool || to.is_unsigned() {
            // Conversion to an unsigned type is modular in C, so one cast wraps.
            return format!("({}){x}", to.c_compute());
        }
        format!("({})({}){x}", to.c_compute(), unsigned_of(to))
    }

    /// A float value rounded to f16/bf16 (and kept as float); other dtypes unchanged.
    fn round_to(&mut self, to: DType, v: String) -> String {
        match to {
            DType::F16 | DType::BF16 => {
                let bits = self.compute_to_storage(to, v);
                self.storage_to_compute(to, bits)
            }
            _ => v,
        }
    }

    fn bitcast(&mut self, i: usize) -> String {
        let (from, to) = (self.src_dtype(i, 0), self.k.uops[i].dtype);
        let x = self.src(i, 0).to_string();
        let bits = match from {
            DType::F32 => self.call(Helper::Bits32, "pg_f32_bits", &x),
            DType::F64 => self.call(Helper::Bits64, "pg_f64_bits", &x),
            DType::F16 | DType::BF16 => self.compute_to_storage(from, x),
            _ if from == to || from.c_compute() == unsigned_of(from) => x,
            _ => format!("({}){x}", unsigned_of(from)),
        };
        match to {
            DType::F32 => self.call(Helper::Bits32, "pg_bits_f32", &bits),
            DType::F64 => self.call(Helper::Bits64, "pg_bits_f64", &bits),
            DType::F16 | DType::BF16 => self.storage_to_compute(to, bits),
            DType::Bool => format!("({bits} != 0)"),
            _ if from == to || to.c_compute() == unsigned_of(to) => bits,
            _ => format!("({}){bits}", to.c_compute()),
        }
    }
}

// ---- free helpers: symbols, literals, wrapping forms ----

/// C's infix symbol for an arithmetic op; `None` for every other op.
fn arith_sym(op: AluOp) -> Option<&'static str> {
    match op {
        AluOp::Add => Some("+"),
        AluOp::Sub => Some("-"),
        AluOp::Mul => Some("*"),
        AluOp::Div => Some("/"),
        AluOp::Exp2
        | AluOp::Log2
        | AluOp::Sin
        | AluOp::Sqrt
        | AluOp::Neg
        | AluOp::Recip
        | AluOp::Max
        | AluOp::Mod
        | AluOp::CmpLt
        | AluOp::CmpEq
        | AluOp::Xor
        | AluOp::And
        | AluOp::Or
        | AluOp::FloorDiv
        | AluOp::FloorMod
        | AluOp::Where
        | AluOp::MulAcc
        | AluOp::Fma
        | AluOp::MulWide
        | AluOp::Requant
        | AluOp::Clamp => None,
    }
}

/// C's infix symbol for a bitwise op; `None` for every other op.
fn bit_sym(op: AluOp) -> Option<&'static str> {
    match op {
        AluOp::Xor => Some("^"),
        AluOp::And => Some("&"),
        AluOp::Or => Some("|"),
        AluOp::Exp2
        | AluOp::Log2
        | AluOp::Sin
        | AluOp::Sqrt
        | AluOp::Neg
        | AluOp::Recip
        | AluOp::Add
        | AluOp::Sub
        | AluOp::Mul
        | AluOp::Div
        | AluOp::Max
        | AluOp::Mod
        | AluOp::CmpLt
        | AluOp::CmpEq
        | AluOp::FloorDiv
        | AluOp::FloorMod
        | AluOp::Where
        | AluOp::MulAcc
        | AluOp::Fma
        | AluOp::MulWide
        | AluOp::Requant
        | AluOp::Clamp => None,
    }
}

/// The unsigned C type of `dt`'s width.
fn unsigned_of(dt: DType) -> &'static str {
    match dt.itemsize() {
        1 => "uint8_t",
        2 => "uint16_t",
        4 => "uint32_t",
        _ => "uint64_t",
    }
}

/// `a op b` wrapping in `dt`: through the unsigned type unless `safe` (bounds exclude overflow)
/// or the type is already a wide unsigned one.
fn wrap_binop(dt: DType, sym: &str, a: &[String], safe: bool) -> String {
    let (t, u) = (dt.c_compute(), wrap_type(dt));
    if safe || t == u {
        return format!("{} {sym} {}", a[0], a[1]);
    }
    format!("({t})(({u}){} {sym} ({u}){})", a[0], a[1])
}

fn wrap_mulacc(dt: DType, a: &[String]) -> String {
    let (t, u) = (dt.c_compute(), wrap_type(dt));
    if t == u {
        return format!("{} * {} + {}", a[0], a[1], a[2]);
    }
    format!("({t})(({u}){} * ({u}){} + ({u}){})", a[0], a[1], a[2])
}

fn wrap_neg(dt: DType, x: &str, safe: bool) -> String {
    let (t, u) = (dt.c_compute(), wrap_type(dt));
    if safe {
        return format!("-{x}");
    }
    if t == u {
        return format!("({u})0 - {x}");
    }
    format!("({t})(({u})0 - ({u}){x})")
}

/// Zero of `dt`'s compute type, as a literal.
fn zero(dt: DType) -> String {
    literal(Scalar::zero(dt))
}

/// A C literal for a constant, exact for every value. Negative values are parenthesised.
fn literal(s: Scalar) -> String {
    let dt = s.dtype();
    match dt {
        DType::Bool => String::from(if s.bits() != 0 { "1" } else { "0" }),
        DType::F64 => float_literal(s.as_f64(), "", format!("{:?}", s.as_f64())),
        d if d.is_float() => {
            let v = s.as_f64() as f32;
            float_literal(f64::from(v), "f", format!("{v:?}"))
        }
        _ => int_literal(dt, s),
    }
}

/// `digits` is Rust's shortest round-trip spelling, which C reads back to the same value.
fn float_literal(v: f64, f: &str, digits: String) -> String {
    if v.is_nan() {
        return format!("__builtin_nan{f}(\"\")");
    }
    let body = if v.is_infinite() {
        format!("__builtin_inf{f}()")
    } else {
        format!("{}{f}", digits.trim_start_matches('-'))
    };
    if v.is_sign_negative() {
        format!("(-{body})")
    } else {
        body
    }
}

fn int_literal(dt: DType, s: Scalar) -> String {
    if dt == DType::U64 {
        let v = s.bits();
        return if v <= i32::MAX as u64 {
            format!("{v}")
        } else {
            format!("UINT64_C({v})")
        };
    }
    let v = s.as_i64();
    let body = match dt {
        DType::I32 if v == i64::from(i32::MIN) => String::from("INT32_MIN"),
        DType::I64 if v == i64::MIN => String::from("INT64_MIN"),
        _ if i32::try_from(v).is_ok() => format!("{v}"),
        DType::U32 => format!("UINT32_C({v})"),
        _ => format!("INT64_C({v})"),
    };
    if v < 0 && body.starts_with('-') {
        format!("({body})")
    } else {
        body
    }
}

// ---- analyses ----

/// For each UOp, whether it is a `Loop` whose body has no nested loop and more than one
/// `Store`: the straight-line upcast copies `CRenderOpts::slp_upcasts` is about.
fn straight_line_multi_store_loops(uops: &[UOp]) -> Vec<bool> {
    let mut marked = vec![false; uops.len()];
    // (loop UOp, stores seen, nested loop seen) for each open loop.
    let mut open: Vec<(usize, usize, bool)> = Vec::new();
    for (i, u) in uops.iter().enumerate() {
        match u.kind {
            UOpKind::Loop => {
                if let Some(outer) = open.last_mut() {
                    outer.2 = true;
                }
                open.push((i, 0, false));
            }
            UOpKind::Store | UOpKind::VecStore { .. } => {
                if let Some(l) = open.last_mut() {
                    l.1 += 1;
                }
            }
            UOpKind::EndLoop => {
                if let Some((l, stores, nested)) = open.pop() {
                    marked[l] = stores > 1 && !nested;
                }
            }
            _ => {}
        }
    }
    marked
}

/// Which UOps must be rendered: stores and loops, and everything they depend on. An `Assign`
/// is needed when its accumulator is read by something needed (iterated to a fixpoint, because
/// a read earlier in a loop sees the previous iteration's assignment).
fn liveness(uops: &[UOp]) -> Vec<bool> {
    let mut live = vec![false; uops.len()];
    loop {
        let mut changed = false;
        for i in (0..uops.len()).rev() {
            let u = &uops[i];
            let root = matches!(
                u.kind,
                UOpKind::Store | UOpKind::VecStore { .. } | UOpKind::Loop | UOpKind::EndLoop
            );
            let assign = u.kind == UOpKind::Assign && live[u.src[0] as usize];
            if (root || assign) && !live[i] {
                live[i] = true;
                changed = true;
            }
            if live[i] {
                for &s in &u.src {
                    changed |= !live[s as usize];
                    live[s as usize] = true;
                }
            }
        }
        if !changed {
            return live;
        }
    }
}

/// Bounds of integer UOps where they are known and fit the UOp's dtype (so the C operation
/// cannot overflow); `None` where unknown or where the value may wrap.
fn int_ranges(uops: &[UOp]) -> Vec<Option<(i128, i128)>> {
    let mut r: Vec<Option<(i128, i128)>> = Vec::with_capacity(uops.len());
    for u in uops {
        let src = |n: usize| u.src.get(n).and_then(|&s| r[s as usize]);
        let v = if u.dtype.is_int() {
            uop_range(u, src).filter(|&(lo, hi)| lo >= u.dtype.int_min() && hi <= u.dtype.int_max())
        } else {
            None
        };
        r.push(v);
    }
    r
}

/// The bounds of an integer UOp's value from its sources' bounds (`src(n)`), where known (the
/// caller checks they fit the dtype). Also read by the padding-bounds pass (`pad_bounds.rs`).
pub(crate) fn uop_range(
    u: &UOp,
    src: impl Fn(usize) -> Option<(i128, i128)>,
) -> Option<(i128, i128)> {
    match &u.kind {
        UOpKind::Const(s) if u.dtype == DType::U64 => Some((s.bits().into(), s.bits().into())),
        UOpKind::Const(s) => Some((s.as_i64().into(), s.as_i64().into())),
        UOpKind::DefineVar { min, max, .. } => Some(((*min).into(), (*max).into())),
        UOpKind::Loop => Some((src(0)?.0, src(0)?.0.max(src(1)?.1 - 1))),
        UOpKind::Alu(op) => alu_range(*op, src(0)?, src(1)),
        _ => None,
    }
}

fn alu_range(op: AluOp, a: (i128, i128), b: Option<(i128, i128)>) -> Option<(i128, i128)> {
    let span = |xs: [i128; 4]| {
        (
            *xs.iter().min().unwrap_or(&0),
            *xs.iter().max().unwrap_or(&0),
        )
    };
    match op {
        AluOp::Neg => Some((-a.1, -a.0)),
        AluOp::Add => b.map(|b| (a.0 + b.0, a.1 + b.1)),
        AluOp::Sub => b.map(|b| (a.0 - b.1, a.1 - b.0)),
        AluOp::Max => b.map(|b| (a.0.max(b.0), a.1.max(b.1))),
        AluOp::Mul => b.map(|b| span([a.0 * b.0, a.0 * b.1, a.1 * b.0, a.1 * b.1])),
        // Non-negative dividend, positive divisor: truncating and floor forms agree.
        AluOp::Div | AluOp::FloorDiv if a.0 >= 0 => {
            b.filter(|b| b.0 > 0).map(|b| (a.0 / b.1, a.1 / b.0))
        }
        AluOp::Mod | AluOp::FloorMod if a.0 >= 0 => {
            b.filter(|b| b.0 > 0).map(|b| (0, a.1.min(b.1 - 1)))
        }
        _ => None,
    }
}
