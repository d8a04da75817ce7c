//! picograd: a small tensor compiler. This facade re-exports the no_std core and, with the `std`
//! feature (on by default), the desktop runtime.
//!
//! The path from training to a device, each step a tested example (these run under
//! `cargo test --doc`).
//!
//! # Train
//!
//! A model is layers ([`nn::Sequential`] of [`nn::Linear`] and activations); a loss is a tensor
//! op; `backward` fills the gradients and an optimizer ([`nn::Adam`], [`nn::SGD`]) updates the
//! parameters in place. [`nn::fit()`] runs the loop over a [`nn::Dataset`]'s batches and tells a
//! hook after every step.
//!
//! ```
//! use picograd::nn::{self, Adam, FitOptions, Last, Module, Optimizer, Order, Sequential};
//! use picograd::nn::optim::AdamConfig;
//! use picograd::Tensor;
//!
//! // Two classes: is x0 + x1 positive?
//! let xs: Vec<f32> = (0..64).map(|i| ((i * 37) % 17) as f32 / 8.0 - 1.0).collect();
//! let ys: Vec<i32> = xs.chunks(2).map(|p| i32::from(p[0] + p[1] > 0.0)).collect();
//! let data = nn::Dataset::new(&[
//!     &Tensor::from_slice(&xs, &[32, 2]),
//!     &Tensor::from_slice(&ys, &[32]),
//! ])?;
//! let model = Sequential::new()
//!     .push(nn::Linear::new(2, 16, true, 0))
//!     .push_fn(|x| Ok(x.relu()))
//!     .push(nn::Linear::new(16, 2, true, 1));
//! let params = model.parameters().into_iter().map(|(_, t)| t).collect();
//! let mut opt = Adam::new(params, AdamConfig::adam(0.05))?;
//! let opts = FitOptions { batch_size: 8, epochs: 5, order: Order::Shuffled { seed: 1 }, last: Last::Keep };
//! let mut steps = 0;
//! let losses = nn::fit(&data, &opts, |b| {
//!     opt.zero_grad();
//!     let loss = nn::losses::cross_entropy(&model.try_forward(&b[0])?, &b[1])?;
//!     loss.backward()?;
//!     opt.step()?;
//!     Ok(loss)
//! }, &mut |_| steps += 1)?;
//! assert_eq!(steps, 5 * 4);
//! assert!(losses[4] < losses[0], "{losses:?}");
//! # Ok::<(), picograd::Error>(())
//! ```
//!
//! # Optimizers
//!
//! Each update is built lazily from the gradients and written into the parameters' own
//! buffers. Plain SGD moves a parameter by `-lr · grad`:
//!
//! ```
//! use picograd::nn::{Optimizer, SGD};
//! use picograd::Tensor;
//! let w = Tensor::from_slice(&[1.0f32, -2.0], &[2]).try_own()?.requires_grad_(true);
//! let mut opt = SGD::new(vec![w.clone()], 0.1, 0.0, false, 0.0)?;
//! for _ in 0..3 {
//!     opt.zero_grad();
//!     w.mul(&w).sum_all().backward()?; // d/dw sum(w²) = 2w
//!     opt.step()?;
//! }
//! let got = w.to_vec::<f32>()?;
//! let want = [1.0f32 * 0.8 * 0.8 * 0.8, -2.0 * 0.8 * 0.8 * 0.8];
//! assert!(got.iter().zip(want).all(|(g, w)| (g - w).abs() < 1e-6), "{got:?}");
//! # Ok::<(), picograd::Error>(())
//! ```
//!
//! # State dicts
//!
//! A model's named parameters save to safetensors and load back into a model of the same
//! shape:
//!
//! ```
//! use picograd::nn::{state, Linear, Module};
//! use picograd::{runtime::safetensors, DType, Tensor};
//! let trained = Linear::new(3, 2, true, 7);
//! // A fresh folder of our own (random name, mode 0700), removed when `tmp` drops.
//! let tmp = picograd::runtime::private_fs::private_temp_dir("picograd-doc-state-").unwrap();
//! let file = tmp.path().join("linear.safetensors");
//! safetensors::save(&file, &trained.parameters())?;
//! let fresh = Linear::new(3, 2, true, 99);
//! state::load_state_dict(&fresh.parameters(), &safetensors::load(&file)?)?;
//! let x = Tensor::ones(&[1, 3], DType::F32);
//! assert_eq!(fresh.forward(&x).to_vec::<f32>()?, trained.forward(&x).to_vec::<f32>()?);
//! # Ok::<(), picograd::Error>(())
//! ```
//!
//! # Export to C
//!
//! Capture the forward pass on an example input, export it as freestanding C (`model.h`,
//! `model.c`, `model_weights.c`: static arena, `const` weights, no malloc, no libm) and write
//! the folder:
//!
//! ```
//! use picograd::export::{export, ExportNames, ExportOptions};
//! use picograd::jit::Capture;
//! use picograd::nn::{Linear, Module};
//! use picograd::{DType, Tensor};
//! let model = Linear::new(4, 3, true, 0);
//! let x = Tensor::zeros(&[1, 4], DType::F32).contiguous();
//! x.realize()?;
//! let y = picograd::no_grad(|| model.forward(&x));
//! let (capture, _) = Capture::record(&[&x], &[&y])?;
//! let names = ExportNames { inputs: vec!["x".into()], outputs: vec!["y".into()] };
//! let bundle = export(&capture, &names, &ExportOptions::default())?;
//! let tmp = picograd::runtime::private_fs::private_temp_dir("picograd-doc-export-").unwrap();
//! let dir = tmp.path().join("linear");
//! picograd::runtime::export::write_bundle(&bundle, &dir)?;
//! assert!(dir.join("model.h").is_file() && dir.join("model.c").is_file());
//! assert_eq!(bundle.weight_bytes, (4 * 3 + 3) * 4);
//! # Ok::<(), picograd::Error>(())
//! ```
//!
//! # Run on a target
//!
//! [`runtime::target`] builds an exported folder for a target of `targets/` with its C
//! compiler, runs it (natively, or under QEMU) and reports outputs, flash, RAM and
//! instructions. On the host (the system's `cc`):
//!
//! ```
//! use picograd::export::{export, ExportNames, ExportOptions};
//! use picograd::jit::Capture;
//! use picograd::runtime::target::{build_and_run, BuildOptions, Target, Values};
//! use picograd::Tensor;
//! let w = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
//! let x = Tensor::from_slice(&[0.0f32; 3], &[3]);
//! let y = x.mul(&w).sum_all();
//! let (capture, _) = Capture::record(&[&x], &[&y])?;
//! let names = ExportNames { inputs: vec!["x".into()], outputs: vec!["y".into()] };
//! let bundle = export(&capture, &names, &ExportOptions::default())?;
//! let tmp = picograd::runtime::private_fs::private_temp_dir("picograd-doc-target-").unwrap();
//! let dir = tmp.path().join("dot");
//! picograd::runtime::export::write_bundle(&bundle, &dir)?;
//! let host = Target::by_name("host")?;
//! let feed = [("x", Values::f32(&[1.0, 1.0, 2.0]))];
//! let report = build_and_run(&host, &dir, &feed, &BuildOptions::default())?;
//! assert_eq!(report.output("y").and_then(Values::to_f32), Some(vec![9.0]));
//! # Ok::<(), picograd::Error>(())
//! ```
//!
//! For a microcontroller, name its target (this needs the cross toolchain and QEMU, which
//! `scripts/demo.sh` installs) and check the memory of the part you mean to use:
//!
//! ```no_run
//! # use picograd::runtime::target::{build_and_run, BuildOptions, Need, Target, Values};
//! # let dir = std::path::Path::new("bundle");
//! let m4 = Target::by_name("cortex-m4")?;
//! let part = m4.budget(None)?.expect("cortex-m4 names a default part"); // nRF52840
//! let report = build_and_run(&m4, dir, &[("x", Values::f32(&[1.0, 1.0, 2.0]))], &BuildOptions::default())?;
//! part.check(Need { flash: report.model_text + report.model_data, ram: report.ram() }, "as built")?;
//! println!("{} instructions per run", report.instructions.unwrap_or(0));
//! # Ok::<(), picograd::Error>(())
//! ```
//!
//! # The runtime and the device
//!
//! With the `std` feature the runtime installs itself the first time a tensor is made, so
//! kernels compile with clang even without [`init`]. The default device is Clang when a C
//! compiler works, else the interpreter; `PICOGRAD_DEVICE=CLANG|INTERP` or
//! [`set_default_device`] choose:
//!
//! ```
//! use picograd::{DType, DeviceKind, Tensor};
//! assert_eq!(Tensor::ones(&[2], DType::F32).device().name(), "CLANG"); // no init() needed
//! picograd::set_default_device(DeviceKind::Interp)?;
//! assert_eq!(Tensor::ones(&[2], DType::F32).device().name(), "INTERP");
//! # Ok::<(), picograd::Error>(())
//! ```
#![no_std]
#![deny(missing_docs)]

pub use picograd_core::*;

/// The std runtime (Clang device, disk cache); present with the `std` feature.
#[cfg(feature = "std")]
pub use picograd_runtime as runtime;

/// Runs a closure without recording gradients on this thread (std only).
#[cfg(feature = "std")]
pub use picograd_runtime::no_grad;

/// The devices the std runtime can make the default, and the call that does.
#[cfg(feature = "std")]
pub use picograd_runtime::install::{set_default_device, DeviceKind};

/// Installs the std runtime as the core's context: `PICOGRAD_DEBUG` (1 kernels and times,
/// 2 schedule, 3 UOps, 4 C source, 5 scheduler decisions), a stderr log, a clock, the `no_grad`
/// scope, and the default device — [`set_default_device`], else `PICOGRAD_DEVICE` (`CLANG` or
/// `INTERP`), else Clang when a C compiler is found, else the interpreter with a one-line
/// notice. Invalid environment values are warned about once, on stderr. Idempotent.
///
/// Calling it is optional on Linux, the BSDs, macOS and Windows: linking the runtime registers
/// it with the core, which runs it when the first tensor is made. Call it at the start of a
/// program to have the environment read (and warned about) up front, or on other platforms.
#[cfg(feature = "std")]
pub fn init() {
    picograd_runtime::install();
}
