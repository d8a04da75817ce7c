//! Host tuning knobs read from the environment: the kernel optimizer's settings
//! (`PICOGRAD_NOOPT=1` turns it off), fused multiply-add (on when the CPU has it;
//! `PICOGRAD_NOFMA=1` turns it off), the C rendering (`PICOGRAD_LIBM=1`: f32 exp2/log2/sin
//! call libm instead of picograd's vectorizable math; `PICOGRAD_NOVEC=1`: no vector UOps, so no explicit
//! vector types in the C; `PICOGRAD_VEC_WIDTH=8`: plan for 8 f32 lanes instead of the widest
//! register), the thread count (`PICOGRAD_THREADS`,
//! default the available parallelism) and the measured search's time bound
//! (`PICOGRAD_SEARCH`, off by default).
//!
//! Invariant: read once per process; the values never change afterwards, so kernels lowered
//! and compiled with them stay valid for the process's lifetime.

use std::sync::OnceLock;
use std::time::Duration;

use picograd_core::codegen::c::CRenderOpts;
use picograd_core::codegen::opt::OptConfig;

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// f32 lanes in the host's widest SIMD register.
pub fn host_vec_width() -> usize {
    if let Some(w) = vec_width_override() {
        return w;
    }
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            return 16;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return 8;
        }
    }
    4
}

/// `PICOGRAD_VEC_WIDTH`: the f32 lanes the optimizer plans for instead of the widest register
/// (1, 2, 4, 8 or 16; anything else is said once on stderr and ignored) — to compare tile
/// choices across widths on one machine, or to keep a kernel cache made for another width.
fn vec_width_override() -> Option<usize> {
    static W: OnceLock<Option<usize>> = OnceLock::new();
    *W.get_or_init(|| {
        let v = std::env::var("PICOGRAD_VEC_WIDTH").ok()?;
        match v.trim().parse::<usize>() {
            Ok(w @ (1 | 2 | 4 | 8 | 16)) => Some(w),
            _ => {
                eprintln!("picograd: PICOGRAD_VEC_WIDTH={v:?} is not 1, 2, 4, 8 or 16; ignored");
                None
            }
        }
    })
}

/// The optimizer settings for host kernels, or `None` when `PICOGRAD_NOOPT` is set: the host's
/// vector width and its cache sizes ([`host_caches`]); vector UOps unless `PICOGRAD_NOVEC` is
/// set (the same tiles, as scalar copies).
pub fn host_opt_config() -> Option<OptConfig> {
    static CFG: OnceLock<Option<OptConfig>> = OnceLock::new();
    *CFG.get_or_init(|| {
        (!env_flag("PICOGRAD_NOOPT")).then(|| {
            let (l1, l2) = host_caches();
            let cfg = OptConfig::for_vec_width(host_vec_width()).with_caches(l1, l2);
            OptConfig {
                vector_lanes: !env_flag("PICOGRAD_NOVEC"),
                ..cfg
            }
        })
    })
}

/// `(L1 data, L2)` bytes of the first core, from Linux's sysfs
/// (`/sys/devices/system/cpu/cpu0/cache/index*/{level,type,size}`); where a level is not found
/// (another OS, a container hiding sysfs), [`OptConfig::DEFAULT_L1_BYTES`] and
/// [`OptConfig::DEFAULT_L2_BYTES`].
pub fn host_caches() -> (usize, usize) {
    let (mut l1, mut l2) = (None, None);
    for i in 0..8 {
        let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{i}");
        let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
        let (Some(level), Some(kind), Some(size)) = (read("level"), read("type"), read("size"))
        else {
            continue;
        };
        let bytes = parse_cache_size(size.trim());
        match (level.trim(), kind.trim()) {
            ("1", "Data" | "Unified") => l1 = l1.or(bytes),
            ("2", "Data" | "Unified") => l2 = l2.or(bytes),
            _ => {}
        }
    }
    (
        l1.unwrap_or(OptConfig::DEFAULT_L1_BYTES),
        l2.unwrap_or(OptConfig::DEFAULT_L2_BYTES),
    )
}

/// A sysfs cache size (`32K`, `1024K`, `8M`, or plain bytes) in bytes.
pub fn parse_cache_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => s.split_at(i),
        None => (s, ""),
    };
    let n: usize = digits.parse().ok()?;
    let scale = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// Does the host CPU have fused multiply-add (and is it not turned off by `PICOGRAD_NOFMA`)?
/// Kernels are compiled with `-march=native`, so `__builtin_fmaf` is then one instruction.
pub fn host_fma() -> bool {
    static FMA: OnceLock<bool> = OnceLock::new();
    *FMA.get_or_init(|| !env_flag("PICOGRAD_NOFMA") && cpu_has_fma())
}

fn cpu_has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("fma")
    }
    // AArch64 always has FMA (fmadd, and fmla on vectors).
    #[cfg(target_arch = "aarch64")]
    {
        true
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        false
    }
}

/// How host kernels render: [`CRenderOpts::host`] with the host's vector width, with libm's
/// scalar f32 transcendentals instead of the vectorizable ones when `PICOGRAD_LIBM` is set,
/// and 64-bit index arithmetic only where addresses are 64-bit.
pub fn host_render_opts() -> CRenderOpts {
    static OPTS: OnceLock<CRenderOpts> = OnceLock::new();
    OPTS.get_or_init(|| CRenderOpts {
        vector_math: !env_flag("PICOGRAD_LIBM"),
        wide_index: cfg!(target_pointer_width = "64"),
        ..CRenderOpts::host()
    })
    .clone()
}

/// Worker threads kernels may split across: `PICOGRAD_THREADS`, else the available parallelism.
pub fn thread_count() -> usize {
    static N: OnceLock<usize> = OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("PICOGRAD_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
            .clamp(1, 256)
    })
}

/// The search bound with `PICOGRAD_SEARCH=1`, per kernel: compiling a candidate takes a few
/// hundred milliseconds, so this tries about ten on a 2-core desktop.
pub const DEFAULT_SEARCH_BUDGET: Duration = Duration::from_millis(4000);

/// Reads a `PICOGRAD_SEARCH` value: unset, empty or `0` is off; `1` searches each new kernel
/// for [`DEFAULT_SEARCH_BUDGET`]; a larger number is the bound in milliseconds. Anything else
/// is an error naming the value.
pub fn parse_search(value: Option<&str>) -> Result<Option<Duration>, String> {
    match value.map(str::trim) {
        None | Some("") | Some("0") => Ok(None),
        Some("1") => Ok(Some(DEFAULT_SEARCH_BUDGET)),
        Some(v) => v
            .parse::<u64>()
            .map(|ms| Some(Duration::from_millis(ms)))
            .map_err(|_| {
                format!(
                    "PICOGRAD_SEARCH={v:?} is neither 0/1 nor a number of milliseconds per kernel"
                )
            }),
    }
}

/// The measured search's time bound per kernel from `PICOGRAD_SEARCH` (see [`parse_search`]);
/// `None` when off. An unreadable value turns the search off, said once on stderr.
pub fn search_budget() -> Option<Duration> {
    static B: OnceLock<Option<Duration>> = OnceLock::new();
    *B.get_or_init(
        || match parse_search(std::env::var("PICOGRAD_SEARCH").ok().as_deref()) {
            Ok(b) => b,
            Err(e) => {
                eprintln!("picograd: {e}; the kernel search stays off");
                None
            }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_switch_values() {
        assert_eq!(parse_search(None), Ok(None));
        assert_eq!(parse_search(Some("")), Ok(None));
        assert_eq!(parse_search(Some("0")), Ok(None));
        assert_eq!(parse_search(Some("1")), Ok(Some(DEFAULT_SEARCH_BUDGET)));
        assert_eq!(
            parse_search(Some("250")),
            Ok(Some(Duration::from_millis(250)))
        );
        let e = parse_search(Some("fast")).unwrap_err();
        assert!(e.contains("\"fast\"") && e.contains("milliseconds"), "{e}");
    }

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("32K"), Some(32 * 1024));
        assert_eq!(parse_cache_size("512K"), Some(512 * 1024));
        assert_eq!(parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(parse_cache_size("4096"), Some(4096));
        assert_eq!(parse_cache_size("12Q"), None);
        assert_eq!(parse_cache_size("K"), None);
        let (l1, l2) = host_caches();
        assert!(l1 > 0 && l2 >= l1, "host caches {l1} / {l2}");
    }
}
