//! Mini-batches over a data set held on the host: a [`Dataset`] of tensors that share their
//! first axis (images and labels), cut into batches in order or shuffled with a seed, the last
//! partial batch kept or dropped.
//!
//! Invariant: the rows are copied to the host once, when the data set is made; every batch is
//! a fresh realized tensor (so the losses' label-range check sees its labels), and the same
//! seed always gives the same order.

use alloc::format;
use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::device::Device;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// One tensor of a data set, as host bytes.
struct Column {
    bytes: Vec<u8>,
    dtype: DType,
    /// The shape of one row (the tensor's shape without its first axis).
    row_shape: Vec<usize>,
    row_bytes: usize,
}

/// Tensors that share their first axis (the rows), held on the host.
pub struct Dataset {
    columns: Vec<Column>,
    rows: usize,
    device: Arc<dyn Device>,
}

/// The order batches take rows in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Row 0, 1, 2, ...
    InOrder,
    /// A permutation fixed by the seed (Fisher–Yates on an xorshift stream).
    Shuffled {
        /// The seed; the same seed gives the same order.
        seed: u64,
    },
}

/// What happens to the rows left over after the last full batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Last {
    /// They form a smaller last batch.
    Keep,
    /// They are left out.
    Drop,
}

impl Dataset {
    /// A data set of `tensors` (computed and copied to the host now), on the default device.
    /// They must all have the same first axis.
    pub fn new(tensors: &[&Tensor]) -> Result<Dataset> {
        let rows = match tensors.first() {
            Some(t) => *t.shape().first().ok_or_else(|| {
                Error::shape("Dataset", "a tensor of rank 0 has no rows to batch")
            })?,
            None => return Err(Error::shape("Dataset", "no tensors given")),
        };
        let columns = tensors
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let shape = t.shape();
                if shape.first() != Some(&rows) {
                    return Err(Error::shape(
                        "Dataset",
                        format!("tensor {i} is {shape:?}, but tensor 0 has {rows} rows"),
                    ));
                }
                let row_shape = shape[1..].to_vec();
                let row_bytes = row_shape.iter().product::<usize>() * t.dtype().itemsize();
                Ok(Column {
                    bytes: t.to_bytes()?,
                    dtype: t.dtype(),
                    row_shape,
                    row_bytes,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Dataset {
            columns,
            rows,
            device: crate::context::default_device(),
        })
    }

    /// The number of rows.
    pub fn len(&self) -> usize {
        self.rows
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.rows == 0
    }

    /// The batches of `size` rows (at least 1), in `order`, with the leftover rows per `last`.
    ///
    /// ```
    /// use picograd_core::nn::data::{Dataset, Last, Order};
    /// use picograd_core::Tensor;
    /// let x = Tensor::from_slice(&[0.0f32, 1.0, 2.0, 3.0, 4.0], &[5, 1]);
    /// let y = Tensor::from_slice(&[0i32, 1, 2, 3, 4], &[5]);
    /// let data = Dataset::new(&[&x, &y]).unwrap();
    /// let sizes: Vec<usize> = data
    ///     .batches(2, Order::InOrder, Last::Keep)
    ///     .map(|b| b.unwrap()[1].shape()[0])
    ///     .collect();
    /// assert_eq!(sizes, [2, 2, 1]);
    /// assert_eq!(data.batches(2, Order::Shuffled { seed: 7 }, Last::Drop).count(), 2);
    /// ```
    pub fn batches(&self, size: usize, order: Order, last: Last) -> Batches<'_> {
        let mut rows: Vec<usize> = (0..self.rows).collect();
        if let Order::Shuffled { seed } = order {
            shuffle(&mut rows, seed);
        }
        let size = size.max(1);
        if last == Last::Drop {
            rows.truncate(self.rows / size * size);
        }
        Batches {
            data: self,
            rows,
            size,
            at: 0,
        }
    }

    /// The number of batches [`Dataset::batches`] gives.
    pub fn batch_count(&self, size: usize, last: Last) -> usize {
        let size = size.max(1);
        match last {
            Last::Keep => self.rows.div_ceil(size),
            Last::Drop => self.rows / size,
        }
    }

    /// The tensors of the rows `rows`, in that order.
    fn gather(&self, rows: &[usize]) -> Result<Vec<Tensor>> {
        self.columns
            .iter()
            .map(|c| {
                let mut bytes = Vec::with_capacity(rows.len() * c.row_bytes);
                for &r in rows {
                    bytes.extend_from_slice(&c.bytes[r * c.row_bytes..(r + 1) * c.row_bytes]);
                }
                let mut shape = alloc::vec![rows.len()];
                shape.extend_from_slice(&c.row_shape);
                super::state::tensor_from_le_bytes(&bytes, &shape, c.dtype, &self.device)
            })
            .collect()
    }
}

/// A permutation of `rows` fixed by `seed`.
fn shuffle(rows: &mut [usize], seed: u64) {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for i in (1..rows.len()).rev() {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        rows.swap(i, (s % (i as u64 + 1)) as usize);
    }
}

/// The batches of a [`Dataset`]: each item is one tensor per data set tensor, `size` rows each
/// (the last maybe fewer).
pub struct Batches<'a> {
    data: &'a Dataset,
    rows: Vec<usize>,
    size: usize,
    at: usize,
}

impl Iterator for Batches<'_> {
    type Item = Result<Vec<Tensor>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.rows.len() {
            return None;
        }
        let end = (self.at + self.size).min(self.rows.len());
        let batch = self.data.gather(&self.rows[self.at..end]);
        self.at = end;
        Some(batch)
    }
}
