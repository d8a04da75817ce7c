//! The hand-written kernel library the cache and security tests compile: `out[i] = a[i] + b[i]`
//! behind the entry wrapper generated kernels export. Included by `#[path]`.

/// `out[i] = a[i] + b[i]` for `i < vars[0]`, behind the entry wrapper generated kernels export.
pub const ADD_SRC: &str = r#"
#include <stdint.h>
void add(float *restrict out, const float *restrict a, const float *restrict b, int32_t n) {
  for (int32_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
void add_entry(void **bufs, const int32_t *vars) {
  add((float *)bufs[0], (const float *)bufs[1], (const float *)bufs[2], vars[0]);
}
"#;
